//! Serving the API over HTTP/1.1 with the limits a public endpoint needs, which
//! `axum::serve` does not offer: a client that sends no complete request head within the
//! header timeout — on a new connection or between requests on a kept-alive one — is cut off; at
//! most `connections_max` connections are served at once (more wait in the kernel's backlog);
//! and a stop closes the listener, lets requests in flight finish until the grace period ends,
//! then cuts what is left, so a slow client never keeps the node from stopping cleanly.
//! (Bodies get their own read timeout where handlers read them: `request.rs`.)

use super::stall::StallGuard;
use crate::config::HttpLimits;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

/// How a server stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Connections still open when the grace period ended, cut off.
    pub cut: usize,
}

/// Serves `app` on `listener` (over TLS with `tls`) until `stop` resolves, then stops as
/// described above. A TLS handshake gets the header timeout too.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    tls: Option<TlsAcceptor>,
    stop: impl Future<Output = ()>,
) -> Stopped {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let permits = Arc::new(Semaphore::new(limits.connections_max.max(1)));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        // Finished connections leave the set as they end, so it holds only open ones.
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: pass, and try again shortly rather
                    // than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let (http, tls, watcher) = (http.clone(), tls.clone(), graceful.watcher());
        let (handshake, send) = (limits.header_read_timeout, limits.send_timeout);
        connections.spawn(async move {
            let _permit = permit;
            let served = match tls {
                None => {
                    let io = TokioIo::new(StallGuard::new(stream, send));
                    watcher.watch(http.serve_connection(io, service)).await
                }
                Some(tls) => match tokio::time::timeout(handshake, tls.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let io = TokioIo::new(StallGuard::new(stream, send));
                        watcher.watch(http.serve_connection(io, service)).await
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake timed out");
                        return;
                    }
                },
            };
            if let Err(e) = served {
                // A client that went away or timed out: routine, not an error of the node.
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    let open = connections.len();
    tracing::info!(
        open,
        grace = ?limits.shutdown_grace,
        "stopped accepting; letting requests in flight finish"
    );
    let cut = tokio::select! {
        () = graceful.shutdown() => 0,
        () = tokio::time::sleep(limits.shutdown_grace) => {
            while connections.try_join_next().is_some() {}
            connections.len()
        }
    };
    if cut > 0 {
        tracing::warn!(cut, "cut off connections still open after the grace period");
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    Stopped { cut }
}
