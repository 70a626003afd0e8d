//! What a server sends back never hands the component a secret value. The host injects
//! credentials a component never sees, but a server may return them: an echo of the request
//! (httpbin's `/headers`), an error page quoting the URL, an account page showing the key. The
//! result's redactor caught a whole value only, so a component that cut the text (`max_chars`)
//! passed all of it but its last character to the agent. So, for a call that can reach secret
//! values, every value is redacted, plain or encoded, from the response's headers, body and
//! trailers before the component reads them; the built-in credential patterns are left, since a
//! token the server issues is the component's to use.
//!
//! The body is held until its end (at most the response cap) and handed over whole, redacted:
//! a value split across two reads is found too. A call that can reach no secret value streams
//! its responses as they come.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame};

use crate::leak::LeakScanner;

type WasiBody = wasmtime_wasi_http::WasiBody;
type BodyError = wasmtime_wasi_http::Error;

/// `response` with `scanner`'s secret values redacted from its headers, body and trailers. A
/// response that can carry a body loses its `Content-Length`: redaction changes the length.
pub fn redacted(
    response: http::Response<WasiBody>,
    scanner: &Arc<LeakScanner>,
    may_have_body: bool,
) -> http::Response<WasiBody> {
    let (mut parts, body) = response.into_parts();
    redact_headers(&mut parts.headers, scanner);
    if may_have_body {
        parts.headers.remove(http::header::CONTENT_LENGTH);
    }
    let body = HeldBody {
        inner: body,
        scanner: scanner.clone(),
        held: Vec::new(),
        trailers: None,
        state: State::Reading,
    };
    http::Response::from_parts(parts, body.boxed_unsync())
}

/// Redact the values from every header value.
fn redact_headers(headers: &mut http::HeaderMap, scanner: &LeakScanner) {
    for value in headers.values_mut() {
        let redacted = scanner.redact_values(value.as_bytes());
        if redacted.as_ref() != value.as_bytes() {
            // A redaction marker is visible ASCII, so the new value is a valid one; were it
            // not, the header would be emptied rather than kept.
            *value = http::HeaderValue::from_bytes(&redacted)
                .unwrap_or_else(|_| http::HeaderValue::from_static(""));
        }
    }
}

/// Where a held body is.
enum State {
    /// Its frames are being read and held.
    Reading,
    /// Its data was handed over; its trailers, if any, are next.
    Trailers,
    /// Everything was handed over.
    Done,
}

/// A body read whole, then handed over as one frame with the values redacted.
struct HeldBody {
    inner: WasiBody,
    scanner: Arc<LeakScanner>,
    held: Vec<u8>,
    trailers: Option<http::HeaderMap>,
    state: State,
}

impl Body for HeldBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            match self.state {
                State::Done => return Poll::Ready(None),
                State::Trailers => {
                    self.state = State::Done;
                    if let Some(mut trailers) = self.trailers.take() {
                        redact_headers(&mut trailers, &self.scanner);
                        return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                    }
                }
                State::Reading => match Pin::new(&mut self.inner).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => self.held.extend_from_slice(&data),
                        Err(frame) => {
                            if let Ok(trailers) = frame.into_trailers() {
                                self.trailers = Some(trailers);
                            }
                        }
                    },
                    Poll::Ready(Some(Err(e))) => {
                        self.state = State::Done;
                        return Poll::Ready(Some(Err(e)));
                    }
                    Poll::Ready(None) => {
                        self.state = State::Trailers;
                        let held = std::mem::take(&mut self.held);
                        let data = match self.scanner.redact_values(&held) {
                            std::borrow::Cow::Borrowed(_) => Bytes::from(held),
                            std::borrow::Cow::Owned(redacted) => Bytes::from(redacted),
                        };
                        if !data.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                    }
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    const VALUE: &str = "S3cr3tV4lue_Zq9xWm2Lp7";

    fn scanner() -> Arc<LeakScanner> {
        Arc::new(LeakScanner::new([("tok_a", VALUE)]).expect("scanner"))
    }

    /// A response whose body arrives in `pieces`, then `trailers`.
    fn response(
        pieces: Vec<&'static str>,
        trailers: Option<http::HeaderMap>,
    ) -> http::Response<WasiBody> {
        let mut frames: Vec<Result<Frame<Bytes>, BodyError>> = pieces
            .into_iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        if let Some(t) = trailers {
            frames.push(Ok(Frame::trailers(t)));
        }
        let body = StreamBody::new(futures::stream::iter(frames)).boxed_unsync();
        http::Response::builder()
            .header("x-echo", format!("Bearer {VALUE}"))
            .header("content-length", "999")
            .body(body)
            .expect("response")
    }

    #[tokio::test]
    async fn a_value_echoed_in_headers_body_or_trailers_never_reaches_the_component() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-trailer", VALUE.parse().expect("value"));
        // The value split across two reads of the body.
        let r = redacted(
            response(
                vec!["{\"auth\": \"Bearer S3cr3tV4l", "ue_Zq9xWm2Lp7\"}"],
                Some(trailers),
            ),
            &scanner(),
            true,
        );
        assert_eq!(r.headers()["x-echo"], "Bearer [REDACTED:tok_a]");
        assert!(r.headers().get("content-length").is_none());
        let collected = r.into_body().collect().await.expect("body");
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(trailers["x-trailer"], "[REDACTED:tok_a]");
        let body = collected.to_bytes();
        assert_eq!(&body[..], b"{\"auth\": \"Bearer [REDACTED:tok_a]\"}");
    }

    #[tokio::test]
    async fn a_body_without_values_comes_through_unchanged() {
        let r = redacted(response(vec!["plain ", "text"], None), &scanner(), false);
        assert_eq!(
            r.headers()["content-length"],
            "999",
            "kept where no body can follow"
        );
        let body = r.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&body[..], b"plain text");
        let empty = http::Response::new(
            Full::new(Bytes::new())
                .map_err(|e| match e {})
                .boxed_unsync(),
        );
        let body = redacted(empty, &scanner(), true)
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert!(body.is_empty());
    }
}
