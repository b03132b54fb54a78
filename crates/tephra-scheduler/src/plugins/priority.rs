//! `priority`: higher PriorityClass value first, for jobs and for tasks within a job; a victim
//! must have a lower priority than the job it makes room for.

use std::cmp::Ordering;

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::Id;

pub struct Priority;

impl Priority {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        ArgReader::new(args, &[], &[])?;
        Ok(Self)
    }
}

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn job_order(&self, view: &View, a: Id, b: Id) -> Ordering {
        view.job_priority(b).cmp(&view.job_priority(a))
    }

    fn task_order(&self, view: &View, a: Id, b: Id) -> Ordering {
        view.task_priority(b).cmp(&view.task_priority(a))
    }
}
