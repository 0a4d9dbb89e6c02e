//! ListGroups: the groups with their protocol type, state and type.

use super::*;

pub(in crate::kafka) async fn list(agent: &Agent, version: i16, request: ListGroupsRequest) -> ListGroupsResponse {
    let states = request.states_filter.iter().map(ToString::to_string).collect();
    let types = request.types_filter.iter().map(ToString::to_string).collect();
    let result = ask(agent, GroupRequest::List { states, types }, |r| match r {
        GroupResponse::List(groups) => Some(groups),
        _ => None,
    })
    .await;
    match result {
        Err(e) => ListGroupsResponse::default().with_error_code(for_group(&e).code()),
        Ok(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .map(|g| {
                    let listed = ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(g.group_id)))
                        .with_protocol_type(str_bytes(g.protocol_type));
                    let listed = if version >= 4 { listed.with_group_state(str_bytes(g.state)) } else { listed };
                    if version >= 5 { listed.with_group_type(str_bytes(g.group_type)) } else { listed }
                })
                .collect(),
        ),
    }
}

impl KafkaApi for ListGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::ListGroups(list(&agent, version, self).await) })
    }
}

impl Resources for ListGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ListGroupsResponse> {
        if walk.cluster(Op::Describe).is_err() {
            walk.listing();
        }
        Ok(())
    }

    fn walk_answer(response: &mut ListGroupsResponse, walk: &AnswerWalk<'_>) {
        walk.listed(&mut response.groups, Res::Group, |g| Some(&mut g.group_id.0));
    }
}
