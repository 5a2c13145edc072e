//! Decoding the row values TiKV stores (the MVCC API's `short_value`), for the integer
//! columns isocert's tables have.
//!
//! Two encodings exist (TiDB's `pkg/util/rowcodec` and `pkg/tablecodec`):
//!
//! - **row format v2** (`tidb_row_format_version = 2`, the default since TiDB 4.0): byte 0
//!   is 128, byte 1 flags (`0x01` large: 32-bit column ids and offsets; `0x02` a checksum
//!   follows the data), then the numbers of non-NULL and NULL columns (u16 little-endian
//!   each), the column ids (non-NULL ones ascending, then the NULL ones), the end offset of
//!   each non-NULL column's bytes, and the data. An integer takes 1, 2, 4 or 8 bytes,
//!   little-endian, the fewest that hold it.
//! - **row format v1**: datums in pairs (column id, value), each a flag byte then the
//!   value: `0x08` zigzag varint, `0x09` uvarint, `0x03` 8-byte big-endian with the sign bit
//!   flipped, `0x04` 8-byte big-endian unsigned, `0x00` NULL.
//!
//! No crate decodes either (TiKV's Rust codec lives inside TiKV, not on crates.io), so
//! this is written here; only integers are decoded, anything else is an error that names
//! the column.

/// A decoded row: `(column id, value)`, `None` for NULL, in the order stored.
pub(crate) type DecodedRow = Vec<(u32, Option<i64>)>;

/// Why a stored row could not be decoded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("row value {at}: {message}")]
pub(crate) struct RowCodecError {
    /// Where (`byte 6`, `column 3`).
    pub(crate) at: String,
    /// What is wrong.
    pub(crate) message: String,
}

fn error(at: impl Into<String>, message: impl Into<String>) -> RowCodecError {
    RowCodecError { at: at.into(), message: message.into() }
}

/// Decodes a stored row in either format.
pub(crate) fn decode_row(bytes: &[u8]) -> Result<DecodedRow, RowCodecError> {
    match bytes.first() {
        Some(128) => decode_v2(bytes),
        Some(_) => decode_v1(bytes),
        None => Ok(Vec::new()),
    }
}

fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], RowCodecError> {
    let slice = bytes
        .get(*at..*at + n)
        .ok_or_else(|| error(format!("byte {at}"), format!("ends inside the {what}")))?;
    *at += n;
    Ok(slice)
}

fn le(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0u64, |acc, b| acc << 8 | u64::from(*b))
}

fn decode_v2(bytes: &[u8]) -> Result<DecodedRow, RowCodecError> {
    let mut at = 1;
    let flags = take(bytes, &mut at, 1, "header")?[0];
    let large = flags & 0x01 != 0;
    let not_null = le(take(bytes, &mut at, 2, "header")?) as usize;
    let null = le(take(bytes, &mut at, 2, "header")?) as usize;
    let width = if large { 4 } else { 1 };
    let mut ids = Vec::with_capacity(not_null + null);
    for _ in 0..not_null + null {
        ids.push(le(take(bytes, &mut at, width, "column ids")?) as u32);
    }
    let offset_width = if large { 4 } else { 2 };
    let mut ends = Vec::with_capacity(not_null);
    for _ in 0..not_null {
        ends.push(le(take(bytes, &mut at, offset_width, "offsets")?) as usize);
    }
    let data = &bytes[at..];
    let mut row = Vec::with_capacity(ids.len());
    let mut start = 0;
    for (i, &end) in ends.iter().enumerate() {
        let value = data
            .get(start..end)
            .ok_or_else(|| error(format!("column {}", ids[i]), "its offsets point outside the data"))?;
        let v = match value.len() {
            1 => i64::from(value[0] as i8),
            2 => i64::from(le(value) as u16 as i16),
            4 => i64::from(le(value) as u32 as i32),
            8 => le(value) as i64,
            n => return Err(error(format!("column {}", ids[i]), format!("{n} bytes is not an integer"))),
        };
        row.push((ids[i], Some(v)));
        start = end;
    }
    row.extend(ids[not_null..].iter().map(|&id| (id, None)));
    Ok(row)
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, RowCodecError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = take(bytes, at, 1, "varint")?[0];
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(error(format!("byte {at}"), "a varint longer than 10 bytes"))
}

fn datum(bytes: &[u8], at: &mut usize) -> Result<Option<i64>, RowCodecError> {
    let flag_at = *at;
    let flag = take(bytes, at, 1, "datum flag")?[0];
    Ok(match flag {
        0x00 => None,
        0x08 => {
            let z = varint(bytes, at)?;
            Some((z >> 1) as i64 ^ -((z & 1) as i64))
        }
        0x09 => Some(varint(bytes, at)? as i64),
        0x03 => Some(
            (u64::from_be_bytes(take(bytes, at, 8, "int")?.try_into().expect("8 bytes")) ^ 1 << 63) as i64,
        ),
        0x04 => Some(u64::from_be_bytes(take(bytes, at, 8, "uint")?.try_into().expect("8 bytes")) as i64),
        other => {
            return Err(error(
                format!("byte {flag_at}"),
                format!("datum kind {other:#04x} is not an integer (isocert's tables hold integers only)"),
            ))
        }
    })
}

fn decode_v1(bytes: &[u8]) -> Result<DecodedRow, RowCodecError> {
    let mut at = 0;
    let mut row = Vec::new();
    while at < bytes.len() {
        let id_at = at;
        let id = datum(bytes, &mut at)?
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| error(format!("byte {id_at}"), "a column id that is NULL or negative"))?;
        row.push((id, datum(bytes, &mut at)?));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    use super::*;

    /// Row format v2 as TiDB's encoder lays it out, written here from the description above.
    fn encode_v2(columns: &[(u32, Option<i64>)]) -> Vec<u8> {
        let not_null: Vec<_> = columns.iter().filter(|c| c.1.is_some()).collect();
        let null: Vec<_> = columns.iter().filter(|c| c.1.is_none()).collect();
        let mut out = vec![128, 0];
        out.extend((not_null.len() as u16).to_le_bytes());
        out.extend((null.len() as u16).to_le_bytes());
        out.extend(not_null.iter().chain(&null).map(|c| c.0 as u8));
        let mut data = Vec::new();
        let mut ends = Vec::new();
        for c in &not_null {
            let v = c.1.unwrap();
            if i64::from(v as i8) == v {
                data.push(v as u8);
            } else if i64::from(v as i16) == v {
                data.extend((v as i16).to_le_bytes());
            } else if i64::from(v as i32) == v {
                data.extend((v as i32).to_le_bytes());
            } else {
                data.extend(v.to_le_bytes());
            }
            ends.push(data.len() as u16);
        }
        for e in ends {
            out.extend(e.to_le_bytes());
        }
        out.extend(data);
        out
    }

    #[test]
    fn row_format_v2_integers_of_every_width_and_nulls() {
        let row = vec![(2, Some(-3)), (3, Some(300)), (4, Some(-70_000)), (5, Some(1 << 40)), (6, None)];
        assert_eq!(decode_row(&encode_v2(&row)).unwrap(), row);
        // A checksum after the data (flag 0x02) is ignored.
        let mut with_checksum = encode_v2(&row[..1]);
        with_checksum[1] = 0x02;
        with_checksum.extend([1, 0xAB, 0xCD, 0xEF, 0x01]);
        assert_eq!(decode_row(&with_checksum).unwrap(), row[..1].to_vec());
        // Cut short anywhere: an error naming where, never a panic.
        let full = encode_v2(&row);
        for n in 1..full.len() {
            let _ = decode_row(&full[..n]);
        }
        assert!(decode_row(&full[..7]).unwrap_err().to_string().contains("ends inside"));
    }

    #[test]
    fn row_format_v1_as_in_tidbs_http_api_document() {
        // docs/tidb_http_api.md: `/mvcc/key/test/t1/1` answers short_value "CAICAkE=",
        // column 1 = the string "A": isocert refuses it by name (not an integer).
        let bytes = base64::engine::general_purpose::STANDARD.decode("CAICAkE=").unwrap();
        let e = decode_row(&bytes).unwrap_err().to_string();
        assert!(e.contains("0x02") && e.contains("not an integer"), "{e}");
        // Column 2 = varint -5, column 3 = comparable int 7, column 4 = NULL.
        let mut v1 = vec![0x08, 4, 0x08, 9, 0x08, 6, 0x03];
        v1.extend((7u64 ^ 1 << 63).to_be_bytes());
        v1.extend([0x08, 8, 0x00]);
        assert_eq!(decode_row(&v1).unwrap(), vec![(2, Some(-5)), (3, Some(7)), (4, None)]);
    }
}
