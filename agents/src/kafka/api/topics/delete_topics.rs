//! DeleteTopics: by name or, from v6, by topic id.

use super::*;

pub(in crate::kafka) async fn delete_topics(
    agent: &Agent,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v6 names topics by name or id; older versions by name only.
    let targets: Vec<(Option<String>, TopicId)> = if version >= 6 {
        request.topics.iter().map(|t| (t.name.as_ref().map(|n| n.as_str().to_owned()), t.topic_id)).collect()
    } else {
        request.topic_names.iter().map(|n| (Some(n.as_str().to_owned()), TopicId::nil())).collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    for (name, topic_id) in targets {
        let resolved = {
            let state = agent.metadata.read();
            match &name {
                Some(name) => state.topic_by_name(name).map(|t| (t.name.clone(), t.topic_id)),
                None => state.topics.get(&topic_id).map(|t| (t.name.clone(), t.topic_id)),
            }
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(super::super::str_bytes(n))))
            .with_topic_id(topic_id);
        responses.push(match resolved {
            None => {
                let error = if name.is_some() { code::UNKNOWN_TOPIC_OR_PARTITION } else { code::UNKNOWN_TOPIC_ID };
                result.with_error_code(error)
            }
            Some((name, topic_id)) => match agent.metadata.propose(Command::DeleteTopic { name: name.clone() }).await {
                Ok(_) => result.with_name(Some(TopicName(super::super::str_bytes(name)))).with_topic_id(topic_id),
                Err(e) => {
                    let (error, message) = node_failure(&e);
                    result.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
                }
            },
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

impl KafkaApi for DeleteTopicsRequest {
    const VERSIONS: (i16, i16) = (1, 6);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, version| async move { ResponseKind::DeleteTopics(delete_topics(&agent, version, self).await) },
        )
    }
}

impl Resources for DeleteTopicsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteTopicsResponse> {
        walk.topics(
            &mut self.topics,
            Op::Delete,
            |t| TopicRef { name: t.name.as_mut().map(|n| &mut n.0), id: Some(&mut t.topic_id) },
            |_| vec![],
        );
        walk.topics(&mut self.topic_names, Op::Delete, |t| TopicRef::name(&mut t.0), |_| vec![]);
        Ok(())
    }

    fn walk_answer(response: &mut DeleteTopicsResponse, walk: &AnswerWalk<'_>) {
        response.responses.iter_mut().filter_map(|t| t.name.as_mut()).for_each(|n| walk.name(&mut n.0));
        walk.topic_ids(&mut response.responses, |t| &mut t.topic_id);
    }

    fn answer_refused(response: &mut DeleteTopicsResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            DeletableTopicResult::default()
                .with_name((!t.name.is_empty()).then_some(TopicName(t.name)))
                .with_topic_id(t.id)
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
        }));
    }
}
