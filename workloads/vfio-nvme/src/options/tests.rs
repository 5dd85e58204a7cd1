use super::*;
use serde_json::{json, Value};

fn values(given: Value) -> ParamValues {
    let given = given.as_object().cloned().unwrap_or_default();
    ParamValues::new("vfio-nvme", SPECS, given).unwrap()
}

#[test]
fn checked_values_become_a_run() {
    let p = Params::from_values(&values(json!({
        "bs": "8k", "qd": 32, "threads": 2, "ios": 10000, "page_size": "2m",
        "verify": true, "bind": true, "reserve_hugepages": true, "nsid": 1
    })))
    .unwrap();
    assert_eq!(p.block_size, 8192);
    assert_eq!(p.queue_depth, 32);
    assert_eq!(p.threads, 2);
    assert_eq!(p.stop, Stop::Ios(10000));
    assert_eq!(p.page_size, PageSize::Size2M);
    assert!(p.verify && p.target.bind && p.target.reserve_hugepages);
    assert_eq!(p.pages_per_thread(), 1, "32 x 8 KiB fit one 2 MiB page");
    p.validate().unwrap();
    let p = Params::from_values(&values(json!({"duration_s": 2.5}))).unwrap();
    assert_eq!(p.stop, Stop::Duration(Duration::from_millis(2500)));
    assert_eq!(
        Params::from_values(&values(json!({}))).unwrap(),
        Params::default()
    );
}

#[test]
fn writes_need_allow_write_and_a_named_device() {
    let run = |given: Value| {
        Params::from_values(&values(given))
            .unwrap()
            .validate()
            .map_err(|e| e.to_string())
    };
    let e = run(json!({"pattern": "randwrite"})).unwrap_err();
    assert!(e.contains("--allow-write"), "{e}");
    let e = run(json!({"pattern": "randwrite", "allow_write": true})).unwrap_err();
    assert!(e.contains("--device"), "{e}");
    run(json!({"pattern": "randwrite", "allow_write": true, "device": "0000:00:04.0"})).unwrap();
}

#[test]
fn out_of_range_values_are_refused_by_the_declaration() {
    for (key, value) in [
        ("qd", json!(0)),
        ("qd", json!(2000)),
        ("threads", json!(0)),
        ("bs", json!(100)),
        ("ios", json!(0)),
        ("pattern", json!("randrw")),
    ] {
        let given = json!({ key: value });
        let refused =
            ParamValues::new("vfio-nvme", SPECS, given.as_object().cloned().unwrap()).unwrap_err();
        assert_eq!(refused.key, key);
    }
    let e = Params::from_values(&values(json!({"page_size": ["4k", "2m"]})))
        .unwrap_err()
        .to_string();
    assert!(e.contains("a run takes one page size"), "{e}");
}

#[test]
fn checked_values_become_a_sweep() {
    let s = SweepParams::from_values(&values(
        json!({"mode": "iotlb-sweep", "page_size": ["4k", "2m"], "pages": "64", "qd": 1}),
    ))
    .unwrap();
    assert_eq!(s.page_sizes, [PageSize::Size4K, PageSize::Size2M]);
    assert_eq!(s.max_pages_for(PageSize::Size2M), 64);
    s.validate().unwrap();
    let s = SweepParams::from_values(&values(json!({"pages": "64,"}))).map(|_| ());
    assert!(s.is_err(), "`64,` is no count");
    let s = SweepParams::from_values(&values(json!({"pages": "4k=8192,2m=16"}))).unwrap();
    assert_eq!(s.max_pages_for(PageSize::Size4K), 8192);
    assert_eq!(s.max_pages_for(PageSize::Size2M), 16);
    for refused in [
        json!({"qd": 4}),
        json!({"pattern": "randwrite"}),
        json!({"pages": "8k=2"}),
        json!({"duration_s": 3}),
    ] {
        assert!(
            SweepParams::from_values(&values(refused.clone())).is_err(),
            "{refused}"
        );
    }
    let e = SweepParams::from_values(&values(json!({"allow_write": false, "verify": true})))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--verify"), "the option given is named: {e}");
    assert!(is_sweep(&values(json!({"mode": "iotlb-sweep"}))));
    assert!(!is_sweep(&values(json!({}))));
}
