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

impl Resources for AlterConfigsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), AlterConfigsResponse> {
        let walked = walk.configs(&mut self.resources, Op::AlterConfigs, |c| (c.resource_type, &mut c.resource_name));
        walked.map_err(|refusal| {
            let responses = self.resources.iter().map(|c| {
                AlterConfigsResourceResponse::default()
                    .with_error_code(refusal.error)
                    .with_error_message(refusal.message.map(StrBytes::from_static_str))
                    .with_resource_type(c.resource_type)
                    .with_resource_name(c.resource_name.clone())
            });
            AlterConfigsResponse::default().with_responses(responses.collect())
        })
    }

    fn walk_answer(response: &mut AlterConfigsResponse, walk: &AnswerWalk<'_>) {
        for result in response.responses.iter_mut().filter(|r| r.resource_type == CONFIG_RESOURCE_TOPIC) {
            walk.name(&mut result.resource_name);
        }
    }

    fn answer_refused(response: &mut AlterConfigsResponse, refused: Refused) {
        response.responses.extend(refused.names.into_iter().map(|n| {
            AlterConfigsResourceResponse::default()
                .with_error_code(n.error)
                .with_resource_type(n.resource_type)
                .with_resource_name(n.name)
        }));
    }
}
