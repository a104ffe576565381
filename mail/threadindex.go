package mail

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// unixToFileTime is the seconds from 1601-01-01, where Windows' FILETIME
// counts from in 100ns units, to 1970-01-01.
const unixToFileTime = 11644473600

// fileTime is t as a FILETIME. It counts from Unix time rather than with
// t.Sub(1601-01-01): a time.Duration holds only 292 years, so that
// difference saturates for every date after 1893 and all threads would get
// the same timestamp.
func fileTime(t time.Time) uint64 {
	return uint64(t.Unix()+unixToFileTime)*10_000_000 + uint64(t.Nanosecond()/100)
}

// ThreadIndex derives Outlook's Thread-Index ([MS-OXOMSG] §2.2.1.3) from
// stored facts only, so every attempt writes the same value: a 22-byte
// header from the thread's start time and a GUID hashed from the root
// Message-ID, then one 5-byte child block for this reply, from the time
// between the thread's start and the reply.
func ThreadIndex(root string, threadStart, reply time.Time) string {
	b := make([]byte, 27)
	var ft [8]byte
	binary.BigEndian.PutUint64(ft[:], fileTime(threadStart))
	copy(b[0:6], ft[0:6]) // the header keeps the six most significant bytes of the FILETIME
	guid := sha256.Sum256([]byte(root))
	copy(b[6:22], guid[:16])

	delta := uint64(0)
	if reply.After(threadStart) {
		delta = fileTime(reply) - fileTime(threadStart)
	}
	// Child block: 1 bit DeltaCode, 31 bits TimeDelta, 4 bits random, 4 bits
	// sequence. DeltaCode 0 stores bits 18–48 of the delta, 1 stores bits 23–53.
	var block uint64
	if delta < 1<<49 {
		block = (delta >> 18) & 0x7fffffff
	} else {
		block = 1<<31 | (delta>>23)&0x7fffffff
	}
	block = block<<8 | uint64(guid[16]&0xf0) // the "random" nibble, stable per thread
	var bb [8]byte
	binary.BigEndian.PutUint64(bb[:], block)
	copy(b[22:27], bb[3:8])
	return base64.StdEncoding.EncodeToString(b)
}
