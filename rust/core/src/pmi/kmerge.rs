//! k-way merge of sorted `(key, count)` streams, summing the counts of equal keys. Used to merge
//! spilled runs while counting and shard tables in `merge`.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::Result;

/// Merge ascending streams (each strictly increasing) and call `emit` once per distinct key in
/// ascending order with the summed count.
pub fn kway_merge<I, F>(mut sources: Vec<I>, mut emit: F) -> Result<()>
where
    I: Iterator<Item = Result<(u128, u64)>>,
    F: FnMut(u128, u64) -> Result<()>,
{
    let mut heap = BinaryHeap::with_capacity(sources.len());
    let mut pending: Vec<u64> = vec![0; sources.len()];
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some(item) = s.next() {
            let (k, c) = item?;
            pending[i] = c;
            heap.push(Reverse((k, i)));
        }
    }
    let mut current: Option<(u128, u64)> = None;
    while let Some(Reverse((k, i))) = heap.pop() {
        let c = pending[i];
        match current {
            Some((ck, ref mut cc)) if ck == k => *cc += c,
            _ => {
                if let Some((ck, cc)) = current {
                    emit(ck, cc)?;
                }
                current = Some((k, c));
            }
        }
        if let Some(item) = sources[i].next() {
            let (nk, nc) = item?;
            pending[i] = nc;
            heap.push(Reverse((nk, i)));
        }
    }
    if let Some((ck, cc)) = current {
        emit(ck, cc)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn merges_and_sums() {
        let a = vec![(1u128, 2u64), (5, 1), (9, 4)];
        let b = vec![(1u128, 3u64), (6, 1)];
        let c: Vec<(u128, u64)> = vec![];
        let srcs = vec![a.clone(), b.clone(), c]
            .into_iter()
            .map(|v| v.into_iter().map(Ok))
            .collect();
        let mut out = vec![];
        kway_merge(srcs, |k, c| {
            out.push((k, c));
            Ok(())
        })
        .unwrap();
        let mut want = BTreeMap::new();
        for (k, c) in a.into_iter().chain(b) {
            *want.entry(k).or_insert(0) += c;
        }
        assert_eq!(out, want.into_iter().collect::<Vec<_>>());
    }
}
