use super::read::parse_file;
use super::*;
use crate::log::embedded::frame;
use crate::log::model::Offset;

/// A unit of `n` records from `first` on, as a partition writer encodes it (payloads of
/// `len` bytes, no seals needed here: only the commit frame is read).
fn unit(first: Offset, n: u64, len: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for offset in first..first + n {
        frame::encode(&mut bytes, offset, 7, &[1; 32], &[2; 32], &vec![3; len]);
    }
    let frames = bytes.len() as u32;
    frame::encode_commit(&mut bytes, first, n as u32, frames);
    bytes
}

/// A round of `(partition, unit)` entries, sealed as the writer writes it.
fn round(entries: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut buf = vec![0; ROUND_HEADER_LEN];
    for (p, u) in entries {
        let at = begin_entry(&mut buf, *p);
        buf.extend_from_slice(u);
        end_entry(&mut buf, at);
    }
    seal_round(&mut buf);
    buf
}

/// The units a file holds, per partition.
fn parse(bytes: &[u8], partitions: u32) -> Result<Vec<Vec<WalUnit>>, (u64, String)> {
    let mut found = vec![WalPartition::default(); partitions as usize];
    parse_file(bytes, partitions, &mut found).map(|()| found.into_iter().map(|p| p.units).collect())
}

/// A file of partitions 0 and 1: its header, then two rounds.
fn two_rounds() -> Vec<u8> {
    let mut file = header(&[0, 1]);
    file.extend(first_round());
    file.extend(round(&[(1, unit(1, 3, 20))]));
    file
}

fn first_round() -> Vec<u8> {
    round(&[(0, unit(0, 2, 10)), (1, unit(0, 1, 5))])
}

/// Where the second round of [`two_rounds`] starts.
fn second_round_at() -> usize {
    header(&[0, 1]).len() + first_round().len()
}

#[test]
fn rounds_read_back_into_each_partitions_units_in_order() {
    let units = parse(&two_rounds(), 2).expect("whole");
    let spans = |p: usize| {
        units[p]
            .iter()
            .map(|u| (u.first, u.end))
            .collect::<Vec<_>>()
    };
    assert_eq!(spans(0), vec![(0, 2)]);
    assert_eq!(spans(1), vec![(0, 1), (1, 4)]);
    assert_eq!(units[0][0].bytes, unit(0, 2, 10));
}

#[test]
fn a_last_round_cut_short_anywhere_is_torn_and_the_rounds_before_it_stay() {
    let file = two_rounds();
    let first_len = second_round_at();
    for cut in first_len + 1..file.len() {
        let units = parse(&file[..cut], 2).unwrap_or_else(|e| panic!("cut at {cut}: {e:?}"));
        assert_eq!(units[1].len(), 1, "cut at {cut}: only the first round");
    }
    // Zeros where the last round should be (blocks that never reached the disk).
    let mut zeroed = file.clone();
    zeroed[first_len..].fill(0);
    assert_eq!(parse(&zeroed, 2).expect("torn")[1].len(), 1);
}

#[test]
fn a_damaged_round_that_others_follow_is_refused_with_where() {
    let file = two_rounds();
    // Every byte of the file header and the first round: rounds follow them, so they were
    // synced.
    let start = header(&[0, 1]).len();
    for at in 0..second_round_at() {
        let mut bad = file.clone();
        bad[at] ^= 0x10;
        match parse(&bad, 2) {
            Err((0, reason)) if at < start => assert!(reason.contains("header"), "{reason}"),
            // A length made to run to the end of the file included: the whole round after it
            // proves it was synced.
            Err((p, reason)) if p == start as u64 => assert!(reason.contains("synced"), "{reason}"),
            other => panic!("flip at {at}: {other:?}"),
        }
    }
}

#[test]
fn a_whole_round_naming_a_partition_the_log_lacks_or_an_unclosed_unit_is_refused() {
    let file = [header(&[0]), round(&[(3, unit(0, 1, 4))])].concat();
    let (_, reason) = parse(&file, 2).expect_err("partition 3 of 2");
    assert!(reason.contains("partition 3"), "{reason}");
    let mut open = unit(0, 1, 4);
    open.truncate(open.len() - 1);
    let file = [header(&[0]), round(&[(0, open)])].concat();
    let (_, reason) = parse(&file, 2).expect_err("no commit frame");
    assert!(reason.contains("not closed"), "{reason}");
    let (_, reason) = parse(&header(&[5]), 2).expect_err("a header naming partition 5 of 2");
    assert!(reason.contains("partition 5"), "{reason}");
}

#[test]
fn files_are_read_from_the_wal_directory_and_gaps_between_units_are_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let nothing = read_all(tmp.path(), 3).expect("no directory");
    assert!(nothing.iter().all(|p| p.units.is_empty() && !p.behind));
    fs::create_dir(tmp.path().join(WAL_DIR)).expect("dir");
    fs::write(tmp.path().join(WAL_DIR).join("0.wal"), two_rounds()).expect("write");
    let found = read_all(tmp.path(), 3).expect("reads");
    assert_eq!(found[1].units.len(), 2);
    let behind: Vec<bool> = found.iter().map(|p| p.behind).collect();
    assert_eq!(behind, [true, true, false]);
    // Partition 1's units 0..1 and 2..3: record 1 is missing.
    let gap = [
        header(&[1]),
        round(&[(1, unit(0, 1, 5))]),
        round(&[(1, unit(2, 1, 5))]),
    ]
    .concat();
    fs::write(tmp.path().join(WAL_DIR).join("0.wal"), gap).expect("write");
    let err = read_all(tmp.path(), 3).expect_err("gap");
    assert!(matches!(err, LogError::WalDamaged { .. }), "{err}");
    clear(tmp.path()).expect("clears");
    assert!(files(tmp.path()).expect("lists").is_empty());
}

#[test]
fn a_file_whose_creation_a_crash_cut_short_holds_nothing_and_names_no_partition() {
    let whole = header(&[0, 1]);
    for cut in 0..whole.len() {
        let mut found = vec![WalPartition::default(); 2];
        parse_file(&whole[..cut], 2, &mut found).unwrap_or_else(|e| panic!("cut at {cut}: {e:?}"));
        assert!(
            found.iter().all(|p| !p.behind && p.units.is_empty()),
            "cut at {cut}"
        );
    }
    let mut found = vec![WalPartition::default(); 2];
    parse_file(&vec![0; whole.len()], 2, &mut found).expect("zeros");
    assert!(found.iter().all(|p| !p.behind));
}
