//! AlterConfigs: replaces a resource's whole set of dynamic configs.

use super::*;

/// AlterConfigs replaces the whole set of configs of each resource.
async fn alter_one(
    agent: &Agent,
    resource: &kafka_protocol::messages::alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Failure> {
    let target = Target::resolve(agent, resource.resource_type, resource.resource_name.as_str())?;
    let mut configs = BTreeMap::new();
    for c in &resource.configs {
        let name = c.name.as_str();
        let value =
            c.value.as_ref().ok_or_else(|| (code::INVALID_REQUEST, format!("config {name} has a null value")))?;
        let value = target.definition(name)?.validate(value.as_str()).map_err(|e| invalid_config(e.to_string()))?;
        configs.insert(name.to_owned(), value);
    }
    target.store(agent, configs, validate_only).await
}

pub(in crate::kafka) async fn alter(agent: &Agent, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let outcome = alter_one(agent, resource, request.validate_only).await;
        let response = kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        responses.push(match outcome {
            Ok(()) => response,
            Err((error, message)) => {
                response.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
            }
        });
    }
    AlterConfigsResponse::default().with_responses(responses)
}

impl KafkaApi for AlterConfigsRequest {
    const VERSIONS: (i16, i16) = (0, 2);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::AlterConfigs(alter(&agent, self).await) })
    }
}

config_resources!(
    AlterConfigsRequest,
    AlterConfigsResponse,
    responses,
    with_responses,
    AlterConfigsResourceResponse,
    Op::AlterConfigs
);
