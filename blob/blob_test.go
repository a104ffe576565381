package blob_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"

	"github.com/helpdesk-dev/helpdesk/blob"
)

func TestBuffer(t *testing.T) {
	t.Parallel()

	t.Run("WhatIsWrittenInPiecesReadsBackWhole", func(t *testing.T) {
		t.Parallel()
		want := make([]byte, 3*blob.ChunkSize+1234)
		_, _ = rand.Read(want)
		var b blob.Buffer
		for p := want; len(p) > 0; {
			n := min(len(p), 7777)
			_, _ = b.Write(p[:n])
			p = p[n:]
		}
		got, _ := io.ReadAll(b.Reader())
		if !bytes.Equal(got, want) || b.Len() != int64(len(want)) || !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("read back %d bytes of %d", len(got), len(want))
		}
		for i, c := range b.Chunks()[:3] {
			if len(c) != blob.ChunkSize || cap(c) != blob.ChunkSize {
				t.Errorf("chunk %d is %d bytes in %d, want whole chunks without spare room", i, len(c), cap(c))
			}
		}
		if _, small := b.Small(); small {
			t.Error("a buffer of four chunks says it is small")
		}
	})

	t.Run("ASmallBufferIsItsOneSlice", func(t *testing.T) {
		t.Parallel()
		in := []byte("hello")
		b := blob.FromBytes(in)
		if s, ok := b.Small(); !ok || &s[0] != &in[0] {
			t.Error("FromBytes copied a small slice")
		}
		var nilBuf *blob.Buffer
		if nilBuf.Len() != 0 || nilBuf.Chunks() != nil {
			t.Error("a nil buffer is not empty")
		}
	})

	t.Run("ReadUpToKeepsTheBoundAndCountsTheRest", func(t *testing.T) {
		t.Parallel()
		kept, total := blob.ReadUpTo(bytes.NewReader(make([]byte, 1000)), 10)
		if kept.Len() != 10 || total != 1000 {
			t.Errorf("kept %d of %d", kept.Len(), total)
		}
	})
}
