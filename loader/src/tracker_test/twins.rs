//! Twins: a function its wrapper calls right away is the wrapper's call, counted once; a stale
//! frame's function is no twin.

use super::*;

/// A twin is a call its wrapper makes right away, of another function. A stale frame (a plug
/// flush's map whose exits were skipped) a few hundred bytes above a new call of the same function
/// made it the stale call's twin, never counted, with nothing to name the loss.
#[test]
fn a_call_of_the_function_of_a_stale_frame_above_it_is_no_twin() {
    const MAP_SG: u64 = 0xffff_ffff_8100_1000;
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1).of(MAP_SG),
        enter(DMA_MAP, 19_700, 2).of(MAP_SG).twin(),
        exit(DMA_MAP, 19_700, 2).of(MAP_SG),
        enter(DMA_MAP, 20_000, 3).of(MAP_SG),
        exit(DMA_MAP, 20_000, 3).of(MAP_SG),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (3, 2));
    assert_eq!(outcome.health("abandoned_frames"), 1);
    outcome.assert_no_other_trouble(&["abandoned_frames"]);
}

/// A function its wrapper calls right away (6.18's dma_map_page_attrs calls dma_map_phys) is the
/// same call: counted once, with the wrapper.
#[test]
fn a_twin_called_by_its_wrapper_is_counted_once() {
    const WRAPPER: u64 = 0xffff_ffff_8100_1000;
    const INNER: u64 = 0xffff_ffff_8100_2000;
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1).of(WRAPPER),
        enter(DMA_MAP, 19_800, 1).of(INNER).twin(),
        exit(DMA_MAP, 19_800, 1).of(INNER),
        exit(DMA_MAP, 20_000, 1).of(WRAPPER),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    outcome.assert_no_other_trouble(&[]);
}
