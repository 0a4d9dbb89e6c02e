//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single configs.

use super::*;

/// Applies one incremental operation to a set of configs.
fn apply_op(
    configs: &mut BTreeMap<String, String>,
    def: &ConfigDef,
    op: i8,
    value: Option<&str>,
) -> Result<(), Failure> {
    let name = def.name;
    match op {
        OP_SET => {
            let value = value.ok_or_else(|| (code::INVALID_REQUEST, format!("SET of {name} needs a value")))?;
            let value = def.validate(value).map_err(|e| invalid_config(e.to_string()))?;
            configs.insert(name.to_owned(), value);
        }
        OP_DELETE => {
            configs.remove(name);
        }
        OP_APPEND | OP_SUBTRACT => {
            if def.config_type != ConfigType::List {
                return Err(invalid_config(format!("{name} is not a list; APPEND and SUBTRACT apply to lists only")));
            }
            let value =
                value.ok_or_else(|| (code::INVALID_REQUEST, format!("APPEND/SUBTRACT of {name} needs a value")))?;
            let current = configs.get(name).map(String::as_str).or(def.default).unwrap_or("");
            let mut items: Vec<String> =
                current.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
            for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if op == OP_APPEND {
                    if !items.iter().any(|i| i == item) {
                        items.push(item.to_owned());
                    }
                } else {
                    items.retain(|i| i != item);
                }
            }
            let value = def.validate(&items.join(",")).map_err(|e| invalid_config(e.to_string()))?;
            configs.insert(name.to_owned(), value);
        }
        other => return Err((code::INVALID_REQUEST, format!("unknown config operation {other}"))),
    }
    Ok(())
}

async fn incremental_alter_one(
    agent: &Agent,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Failure> {
    let target = Target::resolve(agent, resource.resource_type, resource.resource_name.as_str())?;
    let mut configs = target.current(agent)?;
    let mut names = std::collections::HashSet::new();
    for c in &resource.configs {
        if !names.insert(c.name.as_str()) {
            return Err((code::INVALID_REQUEST, format!("config {} appears twice", c.name.as_str())));
        }
        let def = target.definition(c.name.as_str())?;
        apply_op(&mut configs, def, c.config_operation, c.value.as_ref().map(|v| v.as_str()))?;
    }
    target.store(agent, configs, validate_only).await
}

pub(in crate::kafka) async fn incremental_alter(
    agent: &Agent,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in &request.resources {
        let outcome = incremental_alter_one(agent, resource, request.validate_only).await;
        let response =
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
        responses.push(match outcome {
            Ok(()) => response,
            Err((error, message)) => {
                response.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
            }
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

impl KafkaApi for IncrementalAlterConfigsRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, _| async move { ResponseKind::IncrementalAlterConfigs(incremental_alter(&agent, self).await) },
        )
    }
}

config_resources!(
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    responses,
    with_responses,
    IncrementalAlterConfigsResourceResponse,
    Op::AlterConfigs
);
