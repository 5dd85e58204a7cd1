//! The circles of a directed graph, for the checks that the Rust modules and the BPF files form
//! layers: each circle is a set of nodes that all reach one another (a strongly connected
//! component of more than one node, found by Tarjan's walk), or a node with an edge to itself.

use std::collections::{BTreeMap, BTreeSet};

/// Each circle of the graph `next` (node → the nodes it has an edge to), its nodes sorted, the
/// circles in the order the walk closes them.
pub fn circles<N: Ord + Clone>(next: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    let mut walk = Walk {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for root in next.keys() {
        if !walk.index.contains_key(root) {
            walk.from(root);
        }
    }
    walk.found
}

/// Tarjan's walk over the graph, depth first without recursion.
struct Walk<'g, N> {
    next: &'g BTreeMap<N, BTreeSet<N>>,
    /// The order each node was first reached in.
    index: BTreeMap<&'g N, usize>,
    /// The lowest index each node reaches back to while on the stack.
    low: BTreeMap<&'g N, usize>,
    stack: Vec<&'g N>,
    on_stack: BTreeSet<&'g N>,
    found: Vec<Vec<N>>,
}

impl<'g, N: Ord + Clone> Walk<'g, N> {
    fn successors(&self, node: &'g N) -> Vec<&'g N> {
        self.next.get(node).into_iter().flatten().collect()
    }

    fn from(&mut self, root: &'g N) {
        // (node, its successors not yet walked)
        let mut work: Vec<(&'g N, Vec<&'g N>)> = vec![(root, self.enter(root))];
        while let Some((node, pending)) = work.last_mut() {
            let node = *node;
            if let Some(succ) = pending.pop() {
                if !self.index.contains_key(succ) {
                    let after = self.enter(succ);
                    work.push((succ, after));
                } else if self.on_stack.contains(succ) {
                    let low = self.low[node].min(self.index[succ]);
                    self.low.insert(node, low);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                let low = self.low[parent].min(self.low[node]);
                self.low.insert(parent, low);
            }
            if self.low[node] == self.index[node] {
                self.close(node);
            }
        }
    }

    /// Numbers `node` and puts it on the stack; returns its successors, to walk.
    fn enter(&mut self, node: &'g N) -> Vec<&'g N> {
        let n = self.index.len();
        self.index.insert(node, n);
        self.low.insert(node, n);
        self.stack.push(node);
        self.on_stack.insert(node);
        let mut pending = self.successors(node);
        pending.reverse();
        pending
    }

    /// Pops the component `node` heads; keeps it if it is a circle.
    fn close(&mut self, node: &'g N) {
        let mut component = Vec::new();
        while let Some(member) = self.stack.pop() {
            self.on_stack.remove(member);
            component.push(member.clone());
            if member == node {
                break;
            }
        }
        let loops_on_itself = self.next.get(node).is_some_and(|s| s.contains(node));
        if component.len() > 1 || loops_on_itself {
            component.sort();
            self.found.push(component);
        }
    }
}

#[test]
fn circles_are_found_whole_and_a_line_is_none() {
    let graph = |edges: &[(&'static str, &'static str)]| {
        let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for &(from, to) in edges {
            next.entry(from).or_default().insert(to);
            next.entry(to).or_default();
        }
        next
    };
    let line = graph(&[("a", "b"), ("b", "c"), ("a", "c")]);
    assert!(circles(&line).is_empty());
    let two = graph(&[
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "d"),
    ]);
    assert_eq!(circles(&two), [vec!["d", "e"], vec!["a", "b", "c"]]);
    let itself = graph(&[("x", "x"), ("x", "y")]);
    assert_eq!(circles(&itself), [vec!["x"]]);
}
