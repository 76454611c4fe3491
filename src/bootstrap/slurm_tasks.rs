//! Slurm's tasks-per-node lists (`SLURM_STEP_TASKS_PER_NODE`,
//! `SLURM_NTASKS_PER_NODE`): how many ranks of the step run on a given
//! node.
//!
//! The list is comma-separated, one entry per node of the step in node
//! order, and an entry `N(xK)` stands for `K` nodes of `N` tasks each:
//! `4` (one node, or every node alike), `4(x2)`, `4,6`, `2(x3),5`. A
//! step spread unevenly (heterogeneous nodes, `--distribution=arbitrary`,
//! a host file) has different counts per node, so the count must be the
//! one of this node (`SLURM_NODEID`), not the first.

/// The number of tasks on node `node` (0-based, in the list's order) of
/// tasks-per-node list `list`. A list whose entries are all alike gives
/// that count whatever `node` is (as before this function read the
/// node's entry: a node index counted over a larger allocation than the
/// step's must not break the common even case).
///
/// # Errors
/// What is wrong with `list`, or that an uneven list names fewer nodes
/// than `node + 1`.
pub(crate) fn tasks_on_node(list: &str, node: u32) -> Result<u32, String> {
    // The whole list is checked, whichever entry this node reads.
    let mut entries = Vec::new();
    for entry in list.split(',') {
        let entry = entry.trim();
        let (count, repeat) = match entry.split_once("(x") {
            Some((count, rest)) => {
                let Some(repeat) = rest.strip_suffix(')') else {
                    return Err(format!("entry {entry:?} has no closing parenthesis"));
                };
                (count, repeat)
            }
            None => (entry, "1"),
        };
        let count: u32 = count
            .parse()
            .map_err(|_| format!("entry {entry:?}: {count:?} is not a task count"))?;
        let repeat: u64 = repeat
            .parse()
            .ok()
            .filter(|&r| r > 0)
            .ok_or_else(|| format!("entry {entry:?}: {repeat:?} is not a node count"))?;
        entries.push((count, repeat));
    }
    let mut first = 0u64;
    for &(count, repeat) in &entries {
        if u64::from(node) < first + repeat {
            return Ok(count);
        }
        first += repeat;
    }
    match entries.first() {
        Some(&(c, _)) if entries.iter().all(|&(x, _)| x == c) => Ok(c),
        _ => Err(format!(
            "names {first} node(s), but this is node {node} (SLURM_NODEID)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::tasks_on_node;

    #[test]
    fn each_node_gets_its_own_count() {
        assert_eq!(tasks_on_node("4", 0), Ok(4));
        assert_eq!(tasks_on_node("4(x2)", 1), Ok(4));
        assert_eq!(tasks_on_node("4,6", 0), Ok(4));
        assert_eq!(tasks_on_node("4,6", 1), Ok(6));
        assert_eq!(tasks_on_node("2(x3),5", 0), Ok(2));
        assert_eq!(tasks_on_node("2(x3),5", 2), Ok(2));
        assert_eq!(tasks_on_node("2(x3),5", 3), Ok(5));
        assert_eq!(tasks_on_node("1,2(x2),3", 3), Ok(3));
        // Even lists: the count, whatever the node index.
        assert_eq!(tasks_on_node("4(x2)", 5), Ok(4));
        assert_eq!(tasks_on_node("3,3", 7), Ok(3));
    }

    #[test]
    fn malformed_lists_and_missing_nodes_are_errors() {
        for bad in ["", "x", "4(x", "4(x0)", "4(xy)", "4,,6", "-1", "4(x2"] {
            assert!(tasks_on_node(bad, 0).is_err(), "{bad:?}");
        }
        let e = tasks_on_node("2(x3),5", 4).unwrap_err();
        assert!(e.contains("4 node(s)") && e.contains("node 4"), "{e}");
    }
}
