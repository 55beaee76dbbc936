//! The k best (passage, score) pairs seen so far: a heap whose top is the worst kept. Order: a
//! higher score first, and among equal scores the lower passage index (the earlier in the
//! corpus), so the result does not depend on how the passages were visited.
use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: u32,
    pub score: f64,
}

/// Ordered so that the greatest is the worst hit.
#[derive(Clone, Copy, PartialEq)]
struct Worst(Hit);

impl Eq for Worst {}

impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .score
            .total_cmp(&self.0.score)
            .then(self.0.doc.cmp(&other.0.doc))
    }
}

impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    pub fn new(k: usize) -> Self {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    /// The score a passage must beat to enter (minus infinity until k are kept).
    #[inline]
    pub fn threshold(&self) -> f64 {
        if self.heap.len() < self.k {
            f64::NEG_INFINITY
        } else {
            self.heap.peek().map_or(f64::NEG_INFINITY, |w| w.0.score)
        }
    }

    /// Offer a hit; true when it was kept. Passages must be offered in increasing index, so that
    /// a later passage with a score equal to the threshold loses to the kept one.
    #[inline]
    pub fn push(&mut self, doc: u32, score: f64) -> bool {
        if self.heap.len() < self.k {
            self.heap.push(Worst(Hit { doc, score }));
            true
        } else if score > self.threshold() {
            self.heap.pop();
            self.heap.push(Worst(Hit { doc, score }));
            true
        } else {
            false
        }
    }

    /// Best first.
    pub fn into_sorted(self) -> Vec<Hit> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|w| w.0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_best_with_ties_to_the_earlier_passage() {
        let mut t = TopK::new(3);
        for (doc, score) in [(0, 1.0), (1, 3.0), (2, 2.0), (3, 2.0), (4, 0.5), (5, 3.0)] {
            t.push(doc, score);
        }
        let got: Vec<(u32, f64)> = t.into_sorted().iter().map(|h| (h.doc, h.score)).collect();
        assert_eq!(got, [(1, 3.0), (5, 3.0), (2, 2.0)]);
    }

    #[test]
    fn threshold_is_open_until_full() {
        let mut t = TopK::new(2);
        assert_eq!(t.threshold(), f64::NEG_INFINITY);
        t.push(0, 1.0);
        assert_eq!(t.threshold(), f64::NEG_INFINITY);
        t.push(1, 2.0);
        assert_eq!(t.threshold(), 1.0);
        assert!(!t.push(2, 1.0));
    }
}
