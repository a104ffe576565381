// Package blob keeps large byte strings (a mail as it came, an attached file) as a list of fixed-size chunks.
//
// It is a package of its own because every layer that touches a large
// body needs the same guarantee: no copy of it is ever made whole. A
// bytes.Buffer doubles as it grows and leaves the halves behind, a
// concatenation copies, and the driver copies each parameter twice; a
// Buffer grows a chunk at a time, is read chunk by chunk, and the store
// writes it a few chunks per round trip. So a message costs about its own
// size, whatever its size and however it nests.
package blob

import (
	"bytes"
	"io"
	"sync"
)

// ChunkSize is the size of every chunk but the last.
const ChunkSize = 256 << 10

// Buffer is a byte string in chunks; the zero value is empty and ready.
type Buffer struct {
	chunks   [][]byte
	n        int64
	borrowed bool // its chunks are a caller's bytes (FromBytes): never pooled
}

// pool keeps the whole chunks of released buffers for the next ones, so
// that a stream of large mail reuses its memory rather than leaving it to
// the collector.
var pool = sync.Pool{New: func() any { return new([ChunkSize]byte) }}

// FromBytes is a Buffer of b's bytes, cut into chunks where they lie: b
// is not copied, and must not change after.
func FromBytes(b []byte) *Buffer {
	buf := &Buffer{n: int64(len(b)), borrowed: true}
	for len(b) > ChunkSize {
		buf.chunks = append(buf.chunks, b[:ChunkSize:ChunkSize])
		b = b[ChunkSize:]
	}
	buf.chunks = append(buf.chunks, b[:len(b):len(b)])
	return buf
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.n += int64(n)
	for len(p) > 0 {
		last := len(b.chunks) - 1
		switch {
		case last < 0:
			// The first chunk grows as small mail needs; later ones are whole.
			b.chunks = append(b.chunks, make([]byte, 0, min(max(len(p), 512), ChunkSize)))
			last = 0
		case len(b.chunks[last]) == ChunkSize:
			b.chunks = append(b.chunks, pool.Get().(*[ChunkSize]byte)[:0])
			last++
		case len(b.chunks[last]) == cap(b.chunks[last]):
			grown := make([]byte, len(b.chunks[last]), min(2*cap(b.chunks[last])+len(p), ChunkSize))
			copy(grown, b.chunks[last])
			b.chunks[last] = grown
		}
		c := b.chunks[last]
		take := min(cap(c)-len(c), len(p))
		b.chunks[last] = append(c, p[:take]...)
		p = p[take:]
	}
	return n, nil
}

// Release gives its whole chunks back for other buffers to use and
// empties it; nothing may read it or what Chunks returned afterwards.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	if !b.borrowed {
		for _, c := range b.chunks {
			if cap(c) == ChunkSize {
				pool.Put((*[ChunkSize]byte)(c[:ChunkSize]))
			}
		}
	}
	b.chunks, b.n = nil, 0
}

// Len is how many bytes it holds.
func (b *Buffer) Len() int64 {
	if b == nil {
		return 0
	}
	return b.n
}

// Chunks are its bytes in order: every one ChunkSize long but the last.
// They are the Buffer's own, not copies.
func (b *Buffer) Chunks() [][]byte {
	if b == nil {
		return nil
	}
	return b.chunks
}

// Small is its bytes when they fit one chunk (no copy), else nil.
func (b *Buffer) Small() ([]byte, bool) {
	switch {
	case b == nil:
		return nil, false
	case len(b.chunks) == 0:
		return []byte{}, true
	case len(b.chunks) == 1:
		return b.chunks[0], true
	}
	return nil, false
}

// Bytes is a copy of its bytes in one slice, for callers that need one
// and know it is small.
func (b *Buffer) Bytes() []byte {
	if s, ok := b.Small(); ok || b == nil {
		return s
	}
	out := make([]byte, 0, b.n)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// Reader reads it from the start; each call gets a reader of its own.
func (b *Buffer) Reader() io.Reader {
	if b == nil {
		return bytes.NewReader(nil)
	}
	readers := make([]io.Reader, len(b.chunks))
	for i, c := range b.chunks {
		readers[i] = bytes.NewReader(c)
	}
	return io.MultiReader(readers...)
}

// ReadUpTo reads r to its end and keeps at most max bytes of it; total is
// how many there were.
func ReadUpTo(r io.Reader, max int64) (kept *Buffer, total int64) {
	kept = &Buffer{}
	n, _ := io.Copy(kept, io.LimitReader(r, max))
	rest, _ := io.Copy(io.Discard, r)
	return kept, n + rest
}
