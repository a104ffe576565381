package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheProductionBinaryLinksNoTestCode holds the binary that make build
// makes to what it needs: no testing package (a test helper of ours, or a
// library's fuzz helper, would bring it) and no plotting library (the
// burst's chart is in the demo build only). gonum's numeric kernels are
// production code: the vector search's dot product runs in blas32.
func TestTheProductionBinaryLinksNoTestCode(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test lists the binary's packages with the go tool, which is not on PATH: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.HasPrefix(pkg, "gonum.org/v1/plot") || strings.HasSuffix(pkg, "test") && strings.HasPrefix(pkg, "github.com/helpdesk-dev/helpdesk/") {
			t.Errorf("the production binary links %s", pkg)
		}
	}
}
