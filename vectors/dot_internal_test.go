package vectors

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The kernel works in blocks of floats: every length, the tail of a
// block included, must sum every product, and only those.
func TestDotIsTheSumOfTheProducts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 384, 385} {
		a, b := make([]float32, n), make([]float32, n+3) // b longer: dot reads only len(a) of it
		var want float64
		for i := range a {
			a[i], b[i] = rng.Float32()*2-1, rng.Float32()*2-1
			want += float64(a[i]) * float64(b[i])
		}
		b[n], b[n+1], b[n+2] = 1e6, 1e6, 1e6
		if got := dot(a, b); math.Abs(float64(got)-want) > 1e-4 {
			t.Errorf("%d dimensions: %v, want %v", n, got, want)
		}
	}
}

// BenchmarkDot scores 4,096 vectors of 384 floats, MinCandidates and the
// dimension of the embeddings triage keeps, with dot and with the Go loop
// it replaced (four sums at a time), and reports the loop's time ÷ dot's
// as speedup.
func BenchmarkDot(b *testing.B) {
	const dims, n = 384, MinCandidates
	rng := rand.New(rand.NewPCG(7, 8))
	vecs := make([]float32, dims*n)
	for i := range vecs {
		vecs[i] = rng.Float32()*2 - 1
	}
	q := vecs[:dims]
	var sink float32
	scoreAll := func(f func(a, b []float32) float32) time.Duration {
		start := time.Now()
		for i := range n {
			sink += f(q, vecs[i*dims:(i+1)*dims])
		}
		return time.Since(start)
	}
	var loop, kernel time.Duration
	for b.Loop() {
		loop += scoreAll(goLoopDot)
		kernel += scoreAll(dot)
	}
	b.ReportMetric(float64(kernel.Microseconds())/float64(b.N), "dot_µs")
	b.ReportMetric(float64(loop.Microseconds())/float64(b.N), "go_loop_µs")
	b.ReportMetric(float64(loop)/float64(kernel), "speedup")
	_ = sink
}

// goLoopDot is the dot product as this package computed it before it
// called gonum's kernel: the baseline of BenchmarkDot.
func goLoopDot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
