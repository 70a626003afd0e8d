//! Guest stdout and stderr, captured line by line into the call's bounded log.
//!
//! A component's prints must never reach the host's stdout (which carries the MCP protocol on
//! stdio) and must not be able to exhaust host memory: writes always succeed, and what exceeds
//! the log's caps is counted and dropped.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::call_log::{LogSource, SharedLog};

/// Largest write a guest is offered at once (matches wasmtime-wasi's own stdio streams).
const WRITE_PERMIT: usize = 64 * 1024;

/// A stdout or stderr stream that writes into the call's log.
#[derive(Clone)]
pub struct CapturedOutput {
    log: SharedLog,
    source: LogSource,
}

impl CapturedOutput {
    /// A stream writing into `log` as `source` (stdout or stderr).
    pub fn new(log: SharedLog, source: LogSource) -> Self {
        Self { log, source }
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.log.lock().write_stream(self.source, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.log.lock().write_stream(self.source, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
