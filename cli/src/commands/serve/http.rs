//! The HTTP side (axum): two routes, no state but the line to the collector, and a graceful
//! shutdown on SIGINT or SIGTERM.

use super::collector::ScrapeRequests;
use super::encode::CONTENT_TYPE;
use crate::exit::Outcome;
use anyhow::Context;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::signal::unix::{signal, SignalKind};

/// Serves until SIGINT or SIGTERM, then lets requests in flight finish.
pub async fn serve(listener: std::net::TcpListener, requests: ScrapeRequests) -> Outcome {
    let listener =
        tokio::net::TcpListener::from_std(listener).context("handing the listener to tokio")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let stopped = async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("iommutop: stopping: detaching the probes…");
    };
    axum::serve(listener, router(requests))
        .with_graceful_shutdown(stopped)
        .await
        .context("serving HTTP")?;
    Ok(())
}

fn router(requests: ScrapeRequests) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(requests)
}

async fn metrics(State(requests): State<ScrapeRequests>) -> Response {
    match requests.scrape().await {
        Some(Ok(text)) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Some(Err(error)) => {
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response()
        }
        None => collector_gone(),
    }
}

async fn healthz(State(requests): State<ScrapeRequests>) -> Response {
    if requests.collector_alive() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        collector_gone()
    }
}

fn collector_gone() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the collector has stopped: the probes are detached\n",
    )
        .into_response()
}
