//! Embeddings from an OpenAI-compatible server: `POST {base_url}/embeddings`
//! with `{"model", "input": [texts]}`, answered by `{"data": [{"index",
//! "embedding": [floats]}]}` (OpenAI, Ollama's `/v1`, llama.cpp server, vLLM
//! and LM Studio all speak it). Used for memory search by meaning
//! (`core::semantic`).

use futures::FutureExt;
use serde::Deserialize;
use serde_json::json;

use super::{ErrorContext, OpenAiSettings};
use crate::core::provider::{ProviderError, ProviderErrorKind};
use crate::core::semantic::Embedder;

/// One provider's embeddings endpoint, for one model.
pub struct OpenAiEmbedder {
    settings: OpenAiSettings,
    model: String,
    label: String,
    url: String,
    client: crate::providers::LazyClient,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    pub fn new(settings: OpenAiSettings, model: &str) -> Self {
        let url = format!("{}/embeddings", settings.base_url.trim_end_matches('/'));
        Self {
            label: format!("{}/{model}", settings.name),
            client: crate::providers::LazyClient::new(&settings.name, settings.timeout),
            model: model.to_owned(),
            settings,
            url,
        }
    }

    fn context(&self) -> ErrorContext {
        ErrorContext {
            provider: self.settings.name.clone(),
            model: self.model.clone(),
            url: self.url.clone(),
            has_key: self.settings.api_key.is_some(),
            timeout: self.settings.timeout,
        }
    }

    fn invalid(&self, what: &str) -> ProviderError {
        ProviderError::new(
            ProviderErrorKind::Protocol,
            format!("{}: the embeddings answer {what}", self.label),
        )
    }

    async fn request(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ProviderError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client.get()?;
        let mut builder = client
            .post(&self.url)
            .json(&json!({ "model": self.model, "input": texts }));
        if let Some(key) = &self.settings.api_key {
            builder = builder.bearer_auth(key);
        }
        for (name, value) in &self.settings.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let context = self.context();
        let response = builder
            .send()
            .await
            .map_err(|err| context.transport(&err))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|err| context.transport(&err))?;
        if !status.is_success() {
            return Err(context.http(status.as_u16(), &body));
        }
        let answer: Answer = serde_json::from_str(&body)
            .map_err(|err| self.invalid(&format!("is not the OpenAI embeddings format: {err}")))?;
        if answer.data.len() != texts.len() {
            return Err(self.invalid(&format!(
                "holds {} vectors for {} texts",
                answer.data.len(),
                texts.len()
            )));
        }
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (position, datum) in answer.data.into_iter().enumerate() {
            let index = datum.index.unwrap_or(position);
            let slot = vectors
                .get_mut(index)
                .ok_or_else(|| self.invalid(&format!("has index {index} out of range")))?;
            *slot = Some(datum.embedding);
        }
        let vectors: Vec<Vec<f32>> = vectors
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| self.invalid("repeats an index"))?;
        let dims = vectors.first().map_or(0, Vec::len);
        if dims == 0
            || vectors
                .iter()
                .any(|v| v.len() != dims || !v.iter().all(|x| x.is_finite()))
        {
            return Err(
                self.invalid("holds vectors that are empty, of different lengths or not finite")
            );
        }
        Ok(vectors)
    }
}

impl Embedder for OpenAiEmbedder {
    fn label(&self) -> &str {
        &self.label
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, ProviderError>> {
        self.request(texts).boxed()
    }
}
