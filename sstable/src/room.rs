//! Room for buffers whose size a table's bytes decide, reserved fallibly.
//! A recorded length is checked only against the file's size, and a
//! crafted table over a sparse file can claim many gigabytes: the
//! allocator's refusal must fail the read or the open with an
//! `OutOfMemory` I/O error naming `what` needed the room, not abort the
//! process. No function here allocates when the buffer has room.

use std::io;

/// Room in `v` for `more` items, amortized as a push would make it.
pub(crate) fn try_room<T>(v: &mut Vec<T>, more: usize, what: &str) -> io::Result<()> {
    v.try_reserve(more)
        .map_err(|_| refused::<T>(v.len(), more, what))
}

/// Room in `v` for exactly `more` items.
pub(crate) fn try_room_exact<T>(v: &mut Vec<T>, more: usize, what: &str) -> io::Result<()> {
    v.try_reserve_exact(more)
        .map_err(|_| refused::<T>(v.len(), more, what))
}

/// A zeroed buffer of `len` bytes for a block read ([`grow_zeroed`]).
pub(crate) fn zeroed_buffer(len: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    grow_zeroed(&mut buf, len)?;
    Ok(buf)
}

/// Grows `buf` with zeros to `len` bytes (a block's recorded size: a
/// crafted index over a sparse file can claim nearly 2^63 bytes).
pub(crate) fn grow_zeroed(buf: &mut Vec<u8>, len: usize) -> io::Result<()> {
    if buf.len() < len {
        try_room_exact(buf, len - buf.len(), "a block")?;
        buf.resize(len, 0);
    }
    Ok(())
}

/// A copy of `bytes`, a field whose length is recorded in the file.
pub(crate) fn try_copy(bytes: &[u8], what: &str) -> io::Result<Vec<u8>> {
    let mut copy = Vec::new();
    try_room_exact(&mut copy, bytes.len(), what)?;
    copy.extend_from_slice(bytes);
    Ok(copy)
}

fn refused<T>(len: usize, more: usize, what: &str) -> io::Error {
    let bytes = (len as u128 + more as u128) * std::mem::size_of::<T>() as u128;
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("{what} needs room for {bytes} bytes, which the allocator refused"),
    )
}
