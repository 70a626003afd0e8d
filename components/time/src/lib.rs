//! The `time` tool: the current time, and parsing, formatting and differencing timestamps (UTC).

use std::fmt::Write as _;

use chitin_sdk::prelude::*;
use chitin_sdk::serde_json::Number;
use chrono::format::StrftimeItems;
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, TimeDelta, Utc};

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Operation {
    Now,
    Parse,
    Format,
    Diff,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Self::Now => "now",
            Self::Parse => "parse",
            Self::Format => "format",
            Self::Diff => "diff",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct TimeArgs {
    /// What to do: 'now' (current time), 'parse' (a timestamp), 'format' (a timestamp, default now, with a strftime format), 'diff' (timestamp2 minus timestamp)
    operation: Operation,
    /// ISO 8601 / RFC 3339 timestamp, or Unix seconds
    timestamp: Option<String>,
    /// strftime format for 'format', e.g. "%Y-%m-%d %H:%M"
    format: Option<String>,
    /// Second timestamp for 'diff'
    timestamp2: Option<String>,
}

/// One instant, in the three forms agents ask for.
#[derive(Serialize, JsonSchema)]
struct Instant {
    /// RFC 3339, UTC
    iso: String,
    /// Unix seconds
    unix: i64,
    /// Unix milliseconds
    unix_millis: i64,
}

#[derive(Serialize, JsonSchema)]
struct Formatted {
    /// The timestamp rendered with the format
    formatted: String,
}

#[derive(Serialize, JsonSchema)]
struct Diff {
    /// timestamp2 minus timestamp, in seconds (fractional when either has sub-second precision)
    seconds: Number,
    /// The same span for people, e.g. "2h 3m 4s"
    human: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum TimeOutput {
    Instant(Instant),
    Formatted(Formatted),
    Diff(Diff),
}

fn time(args: TimeArgs) -> Result<TimeOutput, ToolError> {
    let op = args.operation;
    match op {
        Operation::Now => Ok(TimeOutput::Instant(instant(Utc::now()))),
        Operation::Parse => {
            let at = parse_timestamp(required(args.timestamp, "timestamp", op)?)?;
            Ok(TimeOutput::Instant(instant(at)))
        }
        Operation::Format => {
            let format = required(args.format, "format", op)?;
            let at = match args.timestamp {
                Some(text) => parse_timestamp(&text)?,
                None => Utc::now(),
            };
            Ok(TimeOutput::Formatted(Formatted {
                formatted: format_time(at, &format)?,
            }))
        }
        Operation::Diff => {
            let from = parse_timestamp(required(args.timestamp, "timestamp", op)?)?;
            let to = parse_timestamp(required(args.timestamp2, "timestamp2", op)?)?;
            Ok(TimeOutput::Diff(diff(to - from)))
        }
    }
}

fn required(value: Option<String>, field: &str, op: Operation) -> Result<String, ToolError> {
    value.ok_or_else(|| {
        ToolError::invalid_args(format!(
            "`{field}` is required for operation `{}`",
            op.name()
        ))
    })
}

fn instant(at: DateTime<Utc>) -> Instant {
    Instant {
        iso: at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        unix: at.timestamp(),
        unix_millis: at.timestamp_millis(),
    }
}

/// Accepts RFC 3339, RFC 2822, `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS[.f]]` (UTC) and Unix seconds.
fn parse_timestamp(text: impl AsRef<str>) -> Result<DateTime<Utc>, ToolError> {
    let text = text.as_ref().trim();
    let parsed = unix_seconds(text)
        .or_else(|| DateTime::parse_from_rfc3339(text).ok().map(|t| t.to_utc()))
        .or_else(|| DateTime::parse_from_rfc2822(text).ok().map(|t| t.to_utc()))
        .or_else(|| {
            [
                "%Y-%m-%dT%H:%M:%S%.f",
                "%Y-%m-%d %H:%M:%S%.f",
                "%Y-%m-%dT%H:%M",
                "%Y-%m-%d %H:%M",
            ]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
            .map(|t| t.and_utc())
        })
        .or_else(|| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        });
    parsed.ok_or_else(|| {
        ToolError::invalid_args(format!(
            "cannot parse timestamp `{text}`: expected RFC 3339 (2024-05-01T12:00:00Z), \
             RFC 2822, YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS (UTC) or Unix seconds"
        ))
    })
}

/// Integer or fractional Unix seconds, when in chrono's range.
fn unix_seconds(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(secs) = text.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0);
    }
    // Only plain decimals: f64 parsing would also take "inf", "NaN" and "1e3".
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return None;
    }
    let value = text.parse::<f64>().ok()?;
    let secs = value.floor();
    // Saturating casts: an out-of-range value fails the range check in `from_timestamp`.
    let nanos = ((value - secs) * 1e9).round().min(999_999_999.0) as u32;
    DateTime::from_timestamp(secs as i64, nanos)
}

fn format_time(at: DateTime<Utc>, format: &str) -> Result<String, ToolError> {
    let bad = || ToolError::invalid_args(format!("invalid strftime format `{format}`"));
    // chrono panics when displaying an invalid format, so check it before formatting.
    let items = StrftimeItems::new(format).parse().map_err(|_| bad())?;
    let mut out = String::new();
    write!(out, "{}", at.format_with_items(items.iter())).map_err(|_| bad())?;
    Ok(out)
}

fn diff(delta: TimeDelta) -> Diff {
    let seconds = if delta.subsec_nanos() == 0 {
        Number::from(delta.num_seconds())
    } else {
        let exact = delta.num_seconds() as f64 + f64::from(delta.subsec_nanos()) / 1e9;
        Number::from_f64(exact).unwrap_or_else(|| Number::from(delta.num_seconds()))
    };
    Diff {
        seconds,
        human: human(delta),
    }
}

/// "1d 2h 3m 4s", zero units left out; under a second, milliseconds.
fn human(delta: TimeDelta) -> String {
    let sign = if delta < TimeDelta::zero() { "-" } else { "" };
    let delta = delta.abs();
    let total = delta.num_seconds();
    if total == 0 {
        return format!("{sign}{}ms", delta.subsec_nanos() / 1_000_000);
    }
    let units = [
        (total / 86_400, "d"),
        (total % 86_400 / 3_600, "h"),
        (total % 3_600 / 60, "m"),
        (total % 60, "s"),
    ];
    let parts: Vec<String> = units
        .iter()
        .filter(|(n, _)| *n != 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    format!("{sign}{}", parts.join(" "))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "time",
            "Current time, and parsing, formatting (strftime) and differencing timestamps, in UTC.",
            time,
        )
        .read_only()
        .output_schema::<TimeOutput>(),
    ]
}

chitin_sdk::export_tools!(tools);
