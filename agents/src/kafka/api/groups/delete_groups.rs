//! DeleteGroups: empty groups and their committed offsets.

use super::*;

pub(in crate::kafka) async fn delete(agent: &Agent, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let ids: Vec<String> = request.groups_names.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::Delete(ids.clone()), |r| match r {
        GroupResponse::Delete(results) => Some(results),
        _ => None,
    })
    .await;
    let results: Vec<(String, Result<(), GroupError>)> = match result {
        Ok(results) => results,
        Err(e) => ids.into_iter().map(|id| (id, Err(e.clone()))).collect(),
    };
    DeleteGroupsResponse::default().with_results(
        results
            .into_iter()
            .map(|(id, r)| {
                DeletableGroupResult::default().with_group_id(GroupId(str_bytes(id))).with_error_code(error_code(&r))
            })
            .collect(),
    )
}

impl KafkaApi for DeleteGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 2);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DeleteGroups(delete(&agent, self).await) })
    }
}

impl Resources for DeleteGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteGroupsResponse> {
        walk.names(&mut self.groups_names, Op::Delete, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut DeleteGroupsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.results, |g| &mut g.group_id.0);
    }

    fn answer_refused(response: &mut DeleteGroupsResponse, refused: Refused) {
        response.results.extend(
            refused
                .names
                .into_iter()
                .map(|n| DeletableGroupResult::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}
