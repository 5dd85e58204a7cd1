//! `iommutop serve` in the lab: under a real Prometheus (Debian's package) scraping it
//! every 2 s on loopback, while dd does 2000 direct 4 KiB reads of the NVMe; then a
//! rebind of the NVMe to vfio-pci and back. The guest side is `cli/tests/lab/serve.sh`.

use crate::support::*;

#[test]
fn prometheus_stores_every_nvme_map_and_serve_detaches_on_sigint() {
    if lab_skipped("lab_serve") {
        return;
    }
    let out = run_guest_script("serve", &["--kernel", "6.12"], "serve.sh", &[]);
    let err = read(&out.join("serve.err"));
    assert_eq!(
        read(&out.join("ready.rc")).trim(),
        "0",
        "serve or Prometheus did not come up: {err}"
    );
    assert_eq!(
        read(&out.join("dd.rc")).trim(),
        "0",
        "{}",
        read(&out.join("dd.out"))
    );

    let nvme = read(&out.join("nvme.txt")).trim().to_string();
    let maps = read_json(&out.join("maps.json"));
    let results = maps["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 1, "one series for the NVMe: {maps}");
    let series = &results[0];
    assert_eq!(series["metric"]["device"], nvme.as_str());
    assert_eq!(series["metric"]["driver"], "nvme");
    let stored: f64 = series["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no value in {series}"));
    eprintln!("Prometheus: iommutop_dma_maps_total{{device=\"{nvme}\"}} = {stored}");
    assert!(stored >= 2000.0, "2000 reads, {stored} maps stored");

    assert_rebind_moves_the_series_at_once(&out, &nvme);

    // How long scrapes took, said and not judged: a scrape's latency is a speed, which
    // bench/serve-soak measures against its target; a scrape that Prometheus gave up on only
    // delayed the stored count above.
    let up = read_json(&out.join("up.json"));
    let slowest = read_json(&out.join("scrape-duration.json"));
    eprintln!(
        "Prometheus: the last scrape up={}, the slowest in the last minute {} s",
        up["data"]["result"][0]["value"][1], slowest["data"]["result"][0]["value"][1]
    );

    let scrape = read(&out.join("scrape.txt"));
    assert!(scrape.contains("iommutop_host_info{"), "{scrape}");
    assert!(
        scrape.contains("iommutop_dma_map_duration_seconds_bucket{"),
        "{scrape}"
    );
    assert_eq!(
        read(&out.join("promtool.rc")).trim(),
        "0",
        "promtool check metrics: {}",
        read(&out.join("promtool.out"))
    );

    assert_eq!(
        read(&out.join("serve.rc")).trim(),
        "0",
        "serve after SIGINT: {err}"
    );
    assert_eq!(
        read(&out.join("bpftool.rc")).trim(),
        "0",
        "bpftool prog show failed, so what is left attached is unknown: {}",
        read(&out.join("bpftool.err"))
    );
    assert_eq!(
        read(&out.join("progs-left.txt")).trim(),
        "",
        "programs left attached"
    );
    eprintln!(
        "promtool check metrics passed on a scrape of {} lines",
        scrape.lines().count()
    );
}

/// The NVMe's `iommutop_dma_maps_total` series in a scrape, by their `driver` label.
fn maps_by_driver(scrape: &str) -> std::collections::BTreeMap<String, u64> {
    scrape
        .lines()
        .map(|line| {
            let (labels, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {line}"));
            let driver = labels
                .split_once("driver=\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(driver, _)| driver.to_string())
                .unwrap_or_else(|| panic!("no driver label: {line}"));
            let value = value
                .parse()
                .unwrap_or_else(|e| panic!("{value}: {e} in {line}"));
            (driver, value)
        })
        .collect()
}

/// Devices that come and go: after the NVMe went to vfio-pci (for longer than serve's 10 s re-read
/// of the devices) and back to nvme, the next scrape's maps are under `driver="nvme"`: the 1000
/// reads after the rebind add exactly the block layer's count to that series, the series of the
/// 2000 reads before (the same labels: a counter that goes on), and nothing to vfio-pci's.
fn assert_rebind_moves_the_series_at_once(out: &std::path::Path, nvme: &str) {
    for step in [
        "rebind-vfio",
        "rebind-nvme",
        "dd-rebound",
        "rebind-b2b",
        "dd-b2b",
    ] {
        assert_eq!(
            read(&out.join(format!("{step}.rc"))).trim(),
            "0",
            "{step} failed: {}",
            read(&out.join("serve.err"))
        );
    }
    assert_eq!(read(&out.join("driver-vfio.txt")).trim(), "vfio-pci");
    let number = |name: &str| -> u64 {
        let text = read(&out.join(name));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {text:?}: {e}"))
    };
    let block_reads = number("stat-after") - number("stat-rebound");
    assert!(block_reads >= 1000, "dd's 1000 reads: {block_reads}");
    let rebound = maps_by_driver(&read(&out.join("scrape-rebound.txt")));
    let after = maps_by_driver(&read(&out.join("scrape-after.txt")));
    eprintln!(
        "{nvme} maps by driver, after the rebind back: {rebound:?}; after 1000 reads: {after:?}"
    );
    let nvme_maps = |scrape: &std::collections::BTreeMap<String, u64>| {
        *scrape
            .get("nvme")
            .unwrap_or_else(|| panic!("no driver=\"nvme\" series: {scrape:?}"))
    };
    assert!(
        nvme_maps(&rebound) >= 2000,
        "the nvme series goes on from the 2000 reads before: {rebound:?}"
    );
    assert_eq!(
        nvme_maps(&after) - nvme_maps(&rebound),
        block_reads,
        "the reads after the rebind are the nvme series': {rebound:?} then {after:?}"
    );
    for (driver, maps) in &after {
        if driver != "nvme" {
            assert_eq!(
                rebound.get(driver),
                Some(maps),
                "driver=\"{driver}\" got maps after the rebind back: {rebound:?} then {after:?}"
            );
        }
    }

    // Back to back, faster than sysfs is read again: the kernel labels each binding's maps.
    let b2b_reads = number("stat-b2b-after") - number("stat-b2b-before");
    let b2b = maps_by_driver(&read(&out.join("scrape-b2b.txt")));
    eprintln!("{nvme} maps by driver after a back-to-back rebind and {b2b_reads} reads: {b2b:?}");
    assert!(b2b_reads >= 1000, "dd's 1000 reads: {b2b_reads}");
    assert!(
        nvme_maps(&b2b) - nvme_maps(&after) >= b2b_reads,
        "the nvme series has the reads after a back-to-back rebind (and its probe's maps): \
         {after:?} then {b2b:?}"
    );
    for (driver, maps) in &b2b {
        assert!(
            driver == "nvme" || *maps == 0,
            "driver=\"{driver}\" got maps: {b2b:?}"
        );
    }
    let whole = read(&out.join("scrape-b2b.txt.all"));
    let series = |name: &str| -> Vec<&str> {
        whole
            .lines()
            .filter(|line| {
                line.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .collect()
    };
    let zero_series: Vec<&str> = series("iommutop_dma_maps_total")
        .into_iter()
        .chain(series("iommutop_completions_total"))
        .filter(|line| line.contains("device=\"nvme0n1\""))
        .collect();
    assert!(
        zero_series.is_empty(),
        "the disk's completions belong to the controller's series: {zero_series:?}"
    );
    let given_back = series("iommutop_probe_rows_given_back_total");
    assert!(
        given_back
            .first()
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|n| n >= 1.0),
        "the nvme binding's and the replaced disks' rows were given back: {given_back:?}"
    );
    let full: Vec<&str> = series("iommutop_probe_health_total")
        .into_iter()
        .filter(|line| line.contains("device_map_full") && !line.ends_with(" 0"))
        .collect();
    assert!(full.is_empty(), "{full:?}");
}
