//! JoinGroup: a classic member joins through the coordinator on the metadata leader.

use super::*;

pub(in crate::kafka) async fn join(
    agent: &Agent,
    version: i16,
    request: JoinGroupRequest,
    client: Client,
) -> JoinGroupResponse {
    let join = JoinRequest {
        group_id: request.group_id.to_string(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version == 0 { request.session_timeout_ms } else { request.rebalance_timeout_ms },
        member_id: request.member_id.to_string(),
        instance_id: opt(request.group_instance_id),
        protocol_type: request.protocol_type.to_string(),
        protocols: request.protocols.into_iter().map(|p| (p.name.to_string(), p.metadata.to_vec())).collect(),
        client_id: client.client_id,
        client_host: client.host,
        require_known_member: version >= 4,
    };
    let joined = ask(agent, GroupRequest::Join(join), |r| match r {
        GroupResponse::Join(joined) => Some(joined),
        _ => None,
    })
    .await;
    let (error, answer) = match joined {
        Ok(Ok(answer)) => (None, answer),
        Ok(Err((e, answer))) => (Some(e), answer),
        Err(e) => (Some(e), Default::default()),
    };
    let members = answer
        .members
        .into_iter()
        .map(|m| {
            let member = JoinGroupResponseMember::default()
                .with_member_id(str_bytes(m.member_id))
                .with_metadata(m.metadata.into());
            if version >= 5 { member.with_group_instance_id(m.instance_id.map(str_bytes)) } else { member }
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(error.as_ref().map_or(0, |e| for_group(e).code()))
        .with_generation_id(if error.is_some() && answer.generation == 0 { -1 } else { answer.generation })
        .with_protocol_name(answer.protocol.map(str_bytes))
        .with_leader(str_bytes(answer.leader))
        .with_member_id(str_bytes(answer.member_id))
        .with_members(members);
    if version >= 7 { response.with_protocol_type(answer.protocol_type.map(str_bytes)) } else { response }
}

impl KafkaApi for JoinGroupRequest {
    const VERSIONS: (i16, i16) = (0, 9);

    async fn start(self, cx: Context<'_>) -> Reply {
        let client = cx.client();
        cx.later(
            move |agent, version| async move { ResponseKind::JoinGroup(join(&agent, version, self, client).await) },
        )
    }
}

impl Resources for JoinGroupRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), JoinGroupResponse> {
        let refused = |refusal: Refusal| JoinGroupResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut JoinGroupResponse, _walk: &AnswerWalk<'_>) {}
}
