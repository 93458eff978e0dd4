//! Errors of the HTTP face: one JSON shape, `{"error": {"code", "message"}}`,
//! with the status code that says what went wrong.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::core::quote::{MESSAGE_BYTES, clip_message};
use crate::core::runtime::RuntimeError;

/// A failed request, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable machine-readable name (`bad_request`, `not_found`, ...).
    pub code: &'static str,
    /// What went wrong, in words; names the field for bad input.
    pub message: String,
    /// For 429: seconds until the next request would be accepted.
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        let message = message.into();
        // A backstop: values are quoted short where the message is built, but
        // no error may carry an outside value whole, whatever built it.
        let message = if message.len() > MESSAGE_BYTES {
            clip_message(&message)
        } else {
            message
        };
        Self {
            status,
            code,
            message,
            retry_after: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// Well-formed content the session's model cannot take (an image for a
    /// model without images): the request is right, the model is not.
    pub fn unsupported_content(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unsupported_content",
            message,
        )
    }

    /// A well-formed request the server cannot carry out as asked (a cron
    /// expression that does not parse, a time in the past); names the field.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    pub fn rate_limited(retry_after: u64) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests; retry in {retry_after} s"),
            )
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        match err {
            RuntimeError::SessionNotFound(_) | RuntimeError::RunNotFound(_) => {
                ApiError::not_found(clip_message(&err.to_string()))
            }
            RuntimeError::RelativeWorkspace(_) => {
                ApiError::bad_request(format!("`workspace`: {}", clip_message(&err.to_string())))
            }
            // A well-formed name of something that does not exist, like an
            // unknown session.
            RuntimeError::NoWorkspace { .. } => {
                ApiError::not_found(format!("`workspace`: {}", clip_message(&err.to_string())))
            }
            RuntimeError::UnknownModel(..) => {
                ApiError::not_found(format!("`model`: {}", clip_message(&err.to_string())))
            }
            RuntimeError::ForkPastEnd { .. } => {
                ApiError::bad_request(clip_message(&err.to_string()))
            }
            RuntimeError::UnknownThoughtLevel(..) => ApiError::bad_request(format!(
                "`thought_level`: {}",
                clip_message(&err.to_string())
            )),
            RuntimeError::InvalidContent { index, message } => {
                ApiError::bad_request(format!("`content[{index}]`: {}", clip_message(&message)))
            }
            RuntimeError::ImagesNotAccepted { .. } => {
                ApiError::unsupported_content(clip_message(&err.to_string()))
            }
            RuntimeError::ShuttingDown | RuntimeError::Busy { .. } => {
                ApiError::unavailable(err.to_string())
            }
            RuntimeError::Journal(_) | RuntimeError::Lease(_) => {
                tracing::error!(error = %err, "request failed");
                ApiError::internal(err.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"pincer\""),
            );
        }
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// The JSON-RPC error for an API error: `-32602` for bad input (like ACP),
/// `-32002` for an unknown session or run, `-32003` for a conflict, `-32004`
/// for content the session's model cannot take, `-32603` otherwise;
/// `data.code` carries the REST code.
pub fn rpc_error(err: ApiError) -> jsonrpsee::types::ErrorObjectOwned {
    let code = match err.status {
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => -32602,
        StatusCode::NOT_FOUND => -32002,
        StatusCode::CONFLICT => -32003,
        StatusCode::UNPROCESSABLE_ENTITY => -32004,
        _ => -32603,
    };
    jsonrpsee::types::ErrorObject::owned(code, err.message, Some(json!({ "code": err.code })))
}
