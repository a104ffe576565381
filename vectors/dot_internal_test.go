package vectors

import (
	"math"
	"math/rand/v2"
	"testing"
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
