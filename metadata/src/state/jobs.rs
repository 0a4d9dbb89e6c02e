//! The storage-job lease: compaction and garbage collection run on one agent at a time, chosen
//! through metadata, so agents that briefly disagree about who is live never run them at once.

use super::State;
use crate::command::{CommandError, Outcome};
use crate::limits::JOB_LEASE_MS_MAX;

/// The agent holding the lease and when it lapses (the proposer's clock, ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobLease {
    pub agent_id: i32,
    pub expires_ms: i64,
}

impl State {
    pub(super) fn acquire_job_lease(
        &mut self,
        agent_id: i32,
        now_ms: i64,
        duration_ms: i64,
    ) -> Result<Outcome, CommandError> {
        if !(1..=JOB_LEASE_MS_MAX).contains(&duration_ms) {
            return Err(CommandError::InvalidCommit(format!("a job lease lasts 1..={JOB_LEASE_MS_MAX} ms")));
        }
        if let Some(held) = self.job_lease
            && held.agent_id != agent_id
            && now_ms < held.expires_ms
        {
            return Err(CommandError::JobLeaseHeld { agent_id: held.agent_id });
        }
        self.job_lease = Some(JobLease { agent_id, expires_ms: now_ms.saturating_add(duration_ms) });
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;

    fn lease(agent_id: i32, now_ms: i64) -> Command {
        Command::AcquireJobLease { agent_id, now_ms, duration_ms: 1000 }
    }

    #[test]
    fn one_agent_holds_the_lease_until_it_lapses() {
        let mut state = State::default();
        assert_eq!(state.apply(1, lease(1, 0)), Ok(Outcome::Done));
        assert_eq!(state.apply(2, lease(2, 500)), Err(CommandError::JobLeaseHeld { agent_id: 1 }));
        // The holder renews; another agent takes over only once a renewal is missed.
        assert_eq!(state.apply(3, lease(1, 900)), Ok(Outcome::Done));
        assert_eq!(state.apply(4, lease(2, 1500)), Err(CommandError::JobLeaseHeld { agent_id: 1 }));
        assert_eq!(state.apply(5, lease(2, 1900)), Ok(Outcome::Done));
        assert_eq!(state.job_lease, Some(JobLease { agent_id: 2, expires_ms: 2900 }));
        let bad = Command::AcquireJobLease { agent_id: 3, now_ms: 5000, duration_ms: 0 };
        assert!(matches!(state.apply(6, bad), Err(CommandError::InvalidCommit(_))));
    }
}
