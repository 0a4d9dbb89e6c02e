//! DescribeConfigs: topic, group and broker configs with their sources, synonyms and
//! documentation.

use super::*;

pub(in crate::kafka) fn describe(agent: &Agent, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let keys = resource.configuration_keys.as_deref();
            let name = resource.resource_name.as_str();
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let listing = match resource.resource_type {
                CONFIG_RESOURCE_TOPIC => {
                    let state = agent.metadata.read();
                    match state.topic_by_name(name) {
                        Some(topic) => Ok(topic_listing(
                            &topic.configs,
                            &state.broker_configs,
                            keys,
                            request.include_synonyms,
                            request.include_documentation,
                        )),
                        None => Err((code::UNKNOWN_TOPIC_OR_PARTITION, format!("unknown topic {name}"))),
                    }
                }
                CONFIG_RESOURCE_GROUP if name.is_empty() => {
                    Err((code::INVALID_REQUEST, "a group config resource names a group".to_owned()))
                }
                CONFIG_RESOURCE_GROUP => {
                    let state = agent.metadata.read();
                    let configs = state.group_configs.get(name).cloned().unwrap_or_default();
                    let shown = Shown { keys, synonyms: request.include_synonyms, docs: request.include_documentation };
                    Ok(group_listing(&configs, &state.broker_configs, shown))
                }
                RESOURCE_BROKER if is_this_broker(agent, name) => {
                    let dynamic = agent.metadata.read().broker_configs.clone();
                    Ok(broker_listing(agent, &dynamic, keys, request.include_synonyms, request.include_documentation))
                }
                RESOURCE_BROKER => {
                    Err((code::INVALID_REQUEST, format!("this agent is broker {}, not {name}", agent.config.node_id)))
                }
                other => Err((code::INVALID_REQUEST, format!("resource type {other} is not supported"))),
            };
            match listing {
                Ok(configs) => result.with_configs(configs),
                Err((error, message)) => {
                    result.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
                }
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

impl KafkaApi for DescribeConfigsRequest {
    const VERSIONS: (i16, i16) = (1, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeConfigs(describe(&agent, self)) })
    }
}

config_resources!(
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    results,
    with_results,
    DescribeConfigsResult,
    Op::DescribeConfigs
);
