//! axum's `Path`, `Query` and body extractors, with their rejections answered as JSON errors
//! like every other error of the API (axum's own are plain text).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use floe_agent::access::Access;
use floe_metadata::State;
use floe_metadata::acl::{AclOperation, AclResourceType};

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

/// The caller's tenant namespace (`floe_metadata::namespace`) and, with `--authorizer`, its ACL
/// access (`floe_agent::access`): a request made with a tenant's API key names only that
/// tenant's topics and groups, and only those its ACLs allow. Without API keys the whole cluster
/// is one namespace and names pass through as they are.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    caller: Option<crate::auth::Caller>,
    access: Option<Access>,
}

impl<S: Send + Sync> FromRequestParts<S> for Scope {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            caller: parts.extensions.get::<crate::auth::Caller>().cloned(),
            access: parts.extensions.get::<Access>().cloned(),
        })
    }
}

impl Scope {
    /// The stored name of a topic, group or idempotency key the caller names.
    pub(crate) fn stored(&self, name: &str) -> String {
        match &self.caller {
            Some(c) => c.namespace.scope(name),
            None => name.to_owned(),
        }
    }

    /// The name the caller knows a stored name by; `None` when it is another tenant's.
    pub(crate) fn shown<'a>(&self, stored: &'a str) -> Option<&'a str> {
        match &self.caller {
            Some(c) => c.namespace.unscope(stored),
            None => Some(stored),
        }
    }

    pub(crate) fn tenant(&self) -> Option<&str> {
        self.caller.as_ref().map(|c| c.tenant.as_str())
    }

    /// The caller's namespace key, which the producers it causes are bound to.
    pub(crate) fn namespace_key(&self) -> Option<&str> {
        self.caller.as_ref().map(|c| c.namespace.key())
    }

    /// What the caller may do, when agents run with `--authorizer`.
    pub(crate) fn access(&self) -> Option<&Access> {
        self.access.as_ref()
    }

    /// The API key the caller used.
    pub(crate) fn key_id(&self) -> Option<&str> {
        self.caller.as_ref().map(|c| c.key_id.as_str())
    }

    /// Whether the caller's ACLs let it do `operation` on the resource it calls `name`.
    pub(crate) fn may(
        &self,
        state: &State,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> bool {
        self.access.as_ref().is_none_or(|a| a.allows(state, operation, resource_type, name))
    }

    pub(crate) fn may_cluster(&self, state: &State, operation: AclOperation) -> bool {
        self.access.as_ref().is_none_or(|a| a.allows_cluster(state, operation))
    }

    /// A 403 unless the caller may do `operation` on the resource it calls `name`.
    pub(crate) fn authorize(
        &self,
        state: &State,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> Result<(), HttpError> {
        if self.may(state, operation, resource_type, name) {
            Ok(())
        } else {
            Err(HttpError::new(
                axum::http::StatusCode::FORBIDDEN,
                format!("not authorized: {operation:?} on {resource_type:?} {name:?}"),
            ))
        }
    }
}
