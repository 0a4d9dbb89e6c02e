//! axum's `Path`, `Query` and body extractors, with their rejections answered as JSON errors
//! like every other error of the API (axum's own are plain text).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::HttpError;

/// Path parameters; a malformed one is a 400 (a partition id that is not a number, say).
#[derive(Debug)]
pub(crate) struct Path<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, HttpError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Self(p.0))
            .map_err(|e| HttpError::bad_request(e.body_text()))
    }
}

/// Query parameters; unknown or malformed ones are a 400.
#[derive(Debug)]
pub(crate) struct Query<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, HttpError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e| HttpError::bad_request(e.body_text()))
    }
}

/// A small body read whole (admin requests), up to axum's default limit of 2 MiB.
#[derive(Debug)]
pub(crate) struct SmallBody(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for SmallBody {
    type Rejection = HttpError;

    async fn from_request(request: Request, state: &S) -> Result<Self, HttpError> {
        Bytes::from_request(request, state).await.map(Self).map_err(|e| HttpError::new(e.status(), e.body_text()))
    }
}
