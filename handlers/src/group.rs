//! [`Group`]: the ranks a collective runs over, in order, and this rank's
//! index among them; plus the tree and hypercube arithmetic the
//! algorithms share.
//!
//! Algorithms work on member *indices* `0 .. n`; a message names its group
//! by a 32-bit tag (the world is tag 0, a sub-group's tag is a hash of its
//! member list and of how many groups with that list this rank created
//! before, so every member derives the same tag without talking).

use crate::error::CollError;
use fastmsg::Rank;

/// Members of a group, in order.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) tag: u32,
    pub(crate) members: Vec<Rank>,
    /// World rank → member index (`u32::MAX`: not a member).
    index_of: Vec<u32>,
    /// This rank's index.
    pub(crate) me: u32,
}

impl Group {
    /// The group of all `size` ranks (tag 0).
    pub(crate) fn world(me: Rank, size: u32) -> Group {
        Group {
            tag: 0,
            members: (0..size).map(Rank).collect(),
            index_of: (0..size).collect(),
            me: me.0,
        }
    }

    /// A sub-group of `members` (in that order) with tag `tag`.
    pub(crate) fn new(tag: u32, me: Rank, size: u32, members: &[Rank]) -> Result<Group, CollError> {
        if members.is_empty() {
            return Err(CollError::BadGroup(
                "a group needs at least one rank".into(),
            ));
        }
        let mut index_of = vec![u32::MAX; size as usize];
        for (i, r) in members.iter().enumerate() {
            if r.0 >= size {
                return Err(CollError::BadGroup(format!(
                    "rank {r} is outside the job of {size} ranks"
                )));
            }
            if index_of[r.index()] != u32::MAX {
                return Err(CollError::BadGroup(format!("rank {r} is listed twice")));
            }
            index_of[r.index()] = i as u32;
        }
        let mine = index_of[me.index()];
        if mine == u32::MAX {
            return Err(CollError::NotMember {
                rank: me,
                members: members.to_vec(),
            });
        }
        Ok(Group {
            tag,
            members: members.to_vec(),
            index_of,
            me: mine,
        })
    }

    /// Members.
    #[inline]
    pub(crate) fn n(&self) -> u32 {
        self.members.len() as u32
    }

    /// World rank of member `i`.
    #[inline]
    pub(crate) fn rank(&self, i: u32) -> Rank {
        self.members[i as usize]
    }

    /// Member index of world rank `r`.
    #[inline]
    pub(crate) fn index(&self, r: Rank) -> Option<u32> {
        self.index_of
            .get(r.index())
            .copied()
            .filter(|&i| i != u32::MAX)
    }

    /// Whether this is the world group.
    #[inline]
    pub(crate) fn is_world(&self) -> bool {
        self.tag == 0
    }
}

/// FNV-1a over the member list and a creation count: a sub-group's tag.
pub(crate) fn tag_of(members: &[Rank], nth: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for w in members
        .iter()
        .map(|r| r.0)
        .chain([nth, members.len() as u32])
    {
        for b in w.to_le_bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    // 0 is the world.
    h.max(1)
}

/// Largest power of two `<= n` (`n >= 1`).
#[inline]
pub(crate) fn pow2_floor(n: u32) -> u32 {
    1 << (31 - n.leading_zeros())
}

/// ⌈log2 n⌉ (`n >= 1`).
#[inline]
pub(crate) fn ceil_log2(n: u32) -> u32 {
    32 - (n - 1).leading_zeros()
}

/// A binomial tree over relative indices `0 .. n` rooted at 0: the parent
/// of `rel` and its children in increasing distance (each child `c` roots
/// the subtree of relative indices `c .. c + d`).
pub(crate) fn binomial(rel: u32, n: u32) -> (Option<u32>, Vec<u32>) {
    let mut children = Vec::new();
    let mut mask = 1u32;
    while mask < n {
        if rel & mask != 0 {
            return (Some(rel - mask), children);
        }
        if rel + mask < n {
            children.push(rel + mask);
        }
        mask <<= 1;
    }
    (None, children)
}

/// How many relative indices the subtree of `rel` covers in the binomial
/// tree of [`binomial`] (`rel .. rel + subtree(rel, n)`): all `n` at the
/// root, else the lowest set bit of `rel`, cut at `n`.
pub(crate) fn subtree(rel: u32, n: u32) -> u32 {
    if rel == 0 {
        n
    } else {
        (1 << rel.trailing_zeros()).min(n - rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_trees_cover_every_index_once() {
        for n in 1..40 {
            let mut seen = vec![0; n as usize];
            seen[0] += 1;
            for r in 0..n {
                let (p, ch) = binomial(r, n);
                assert_eq!(p.is_none(), r == 0);
                // A subtree is the rank and its children's subtrees, in
                // order, back to back.
                let mut next = r + 1;
                for &c in &ch {
                    assert_eq!(c, next, "n={n} r={r}");
                    next += subtree(c, n);
                }
                assert_eq!(next, r + subtree(r, n), "n={n} r={r}");
                for c in ch {
                    assert_eq!(binomial(c, n).0, Some(r), "n={n} r={r} c={c}");
                    seen[c as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "n={n} {seen:?}");
        }
    }

    #[test]
    fn logs() {
        assert_eq!(pow2_floor(1), 1);
        assert_eq!(pow2_floor(7), 4);
        assert_eq!(pow2_floor(8), 8);
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(5), 3);
        assert_eq!(ceil_log2(8), 3);
    }

    #[test]
    fn groups_reject_bad_lists() {
        assert!(Group::new(1, Rank(0), 4, &[Rank(0), Rank(0)]).is_err());
        assert!(Group::new(1, Rank(0), 4, &[Rank(5)]).is_err());
        assert!(matches!(
            Group::new(1, Rank(0), 4, &[Rank(1)]),
            Err(CollError::NotMember { .. })
        ));
        let g = Group::new(1, Rank(2), 4, &[Rank(3), Rank(2)]).unwrap();
        assert_eq!(
            (g.me, g.index(Rank(3)), g.index(Rank(0))),
            (1, Some(0), None)
        );
    }
}
