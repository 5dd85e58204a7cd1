//! Understudies: a second copy of each program that enters or closes a call where its lead's run
//! was skipped, and leaves the call to the lead everywhere else.

use super::*;

fn with_understudies(steps: &[Step]) -> Outcome {
    let steps: Vec<(Context, Step)> = steps.iter().map(|s| (Context::Interrupt, *s)).collect();
    run_with(
        &steps,
        Setup {
            understudies: true,
            ..Setup::default()
        },
    )
}

/// Both copies ran at both ends: the understudies leave the call to the lead, which times it.
#[test]
fn an_understudy_leaves_a_call_its_lead_saw_to_the_lead() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    let map = outcome.op_health(Op::DmaMap);
    assert_eq!((map.understudy_entries, map.understudy_exits), (0, 0));
    outcome.assert_no_other_trouble(&[]);
}

/// The kernel skipped the lead's entry (a task preempted inside it on this CPU): the understudy
/// enters the call, the lead's exit times it.
#[test]
fn an_understudy_enters_a_call_whose_lead_entry_was_skipped() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.op_health(Op::DmaMap).understudy_entries, 1);
    outcome.assert_no_other_trouble(&[]);
}

/// The lead's exit was skipped: the understudy closes the call it finds open.
#[test]
fn an_understudy_closes_a_call_whose_lead_exit_was_skipped() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.op_health(Op::DmaMap).understudy_exits, 1);
    outcome.assert_no_other_trouble(&[]);
}

/// Neither copy saw the entry: the lead's exit counts the call, untimed, and says so; the
/// understudy, finding no frame, leaves it to the lead rather than count it again.
#[test]
fn a_call_whose_entries_were_both_skipped_is_counted_once() {
    let outcome = with_understudies(&[
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 0));
    assert_eq!(outcome.op_health(Op::DmaMap).unseen_entries, 1);
    outcome.assert_no_other_trouble(&["exit_without_entry"]);
}

/// An interrupt lands between a lead's entry and its understudy's, on the same stack: its own
/// call is entered and closed by its own lead; the understudy of the call below then finds its
/// lead's frame on top again, and leaves it.
#[test]
fn an_interrupt_between_a_lead_and_its_understudy_is_a_call_of_its_own() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 19_000, 2),
        enter(DMA_MAP, 19_000, 2).understudy(),
        exit(DMA_MAP, 19_000, 2),
        exit(DMA_MAP, 19_000, 2).understudy(),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (2, 2));
    let map = outcome.op_health(Op::DmaMap);
    assert_eq!((map.understudy_entries, map.understudy_exits), (0, 0));
    outcome.assert_no_other_trouble(&[]);
}
