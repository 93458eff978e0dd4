//! `GET /v1/health/summary` (JSON-RPC `health.summary`): the runs created
//! in a recent window, in every session and by every process sharing the
//! store, summed by the store (`Counts::run_window`), and the instances
//! sharing a PostgreSQL store (`Counts::instances`).

use axum::extract::State;
use serde::Deserialize;

use super::AppState;
use super::api::Api;
use super::error::ApiError;
use super::routes::QueryParams;
use crate::core::quote::quote;
use crate::views::HealthSummary;

/// The window when none is asked for: the last hour.
pub const DEFAULT_WINDOW_MS: i64 = 3_600_000;
/// The longest window: a day.
pub const MAX_WINDOW_MS: i64 = 86_400_000;
/// The shortest window: a minute.
pub const MIN_WINDOW_MS: i64 = 60_000;
/// The narrowest bucket: five minutes.
const MIN_BUCKET_MS: i64 = 300_000;

/// `?window=`: how far back, in whole minutes or hours (`30m`, `1h`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryQuery {
    pub window: Option<String>,
}

/// What `window` may be, as the OpenAPI document says it: `1m` to `1440m`,
/// `1h` to `24h`, without leading zeros.
pub const WINDOW_PATTERN: &str =
    "^(([1-9]|1[0-9]|2[0-4])h|([1-9]|[1-9][0-9]|[1-9][0-9]{2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)m)$";

/// The window `text` asks for, in milliseconds, from a minute to a day.
pub fn window_ms(text: Option<&str>) -> Result<i64, ApiError> {
    let Some(text) = text else {
        return Ok(DEFAULT_WINDOW_MS);
    };
    let parsed = [('h', 3_600_000), ('m', 60_000)]
        .into_iter()
        .find_map(|(unit, ms)| {
            let digits = text.strip_suffix(unit)?;
            let plain = !digits.is_empty()
                && !digits.starts_with('0')
                && digits.bytes().all(|b| b.is_ascii_digit());
            let n: i64 = digits.parse().ok().filter(|_| plain)?;
            n.checked_mul(ms)
        })
        .filter(|ms| (MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(ms));
    parsed.ok_or_else(|| {
        ApiError::bad_request(format!(
            "`window` must be whole minutes or hours from 1m to 24h, such as `30m` or `1h`, got `{}`",
            quote(text)
        ))
    })
}

/// How wide the buckets of a window are: five minutes, or a 24th of a
/// longer window (in whole minutes), so the timeline has at most 24 bars
/// past two hours.
pub fn bucket_ms(window_ms: i64) -> i64 {
    let minute = 60_000;
    let share = (window_ms / 24 + minute - 1) / minute * minute;
    share.max(MIN_BUCKET_MS)
}

impl Api {
    /// The health summary of the last `window` (default an hour).
    pub async fn health_summary(&self, query: SummaryQuery) -> Result<HealthSummary, ApiError> {
        let window = window_ms(query.window.as_deref())?;
        let bucket = bucket_ms(window);
        let until = crate::core::session::now_millis();
        let unavailable = |err: crate::core::journal::JournalError| {
            ApiError::unavailable(format!("the store did not answer: {err}"))
        };
        let runs = self
            .counts
            .run_window(until - window, bucket)
            .await
            .map_err(unavailable)?;
        let instances = self.counts.instances().await.map_err(unavailable)?;
        Ok(HealthSummary::new(
            &runs,
            until,
            window,
            bucket,
            instances.as_deref(),
        ))
    }
}

pub async fn summary(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<SummaryQuery>,
) -> Result<axum::Json<HealthSummary>, ApiError> {
    Ok(axum::Json(state.shared.api.health_summary(query).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_run_from_a_minute_to_a_day_and_buckets_from_five_minutes() {
        assert_eq!(window_ms(None).unwrap(), 3_600_000);
        assert_eq!(window_ms(Some("30m")).unwrap(), 1_800_000);
        assert_eq!(window_ms(Some("24h")).unwrap(), 86_400_000);
        assert_eq!(window_ms(Some("1440m")).unwrap(), 86_400_000);
        for bad in [
            "", "0", "0m", "30s", "25h", "1441m", "soon", "-1h", "01h", "+1h", "1h30m", "1 h", "h",
            "1h\n",
        ] {
            let err = window_ms(Some(bad)).unwrap_err();
            assert!(err.message.contains("`window`"), "{bad}: {err:?}");
        }
        // The document's pattern says the same.
        let pattern = regex::Regex::new(WINDOW_PATTERN).unwrap();
        for n in 0..=1500 {
            for unit in ["m", "h"] {
                let text = format!("{n}{unit}");
                assert_eq!(
                    pattern.is_match(&text),
                    window_ms(Some(&text)).is_ok(),
                    "{text}"
                );
            }
        }
        assert_eq!(bucket_ms(3_600_000), 300_000);
        assert_eq!(bucket_ms(600_000), 300_000);
        assert_eq!(bucket_ms(86_400_000), 3_600_000);
        assert_eq!(bucket_ms(6 * 3_600_000 + 60_000), 960_000);
    }
}
