package bench

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportHTML: tables become HTML tables, the folder's SVG plots are
// inlined, and anything else (a missing file, a path out of the folder, a
// URL, another format) keeps its link.
func TestReportHTML(t *testing.T) {
	dir := t.TempDir()
	svg := `<svg xmlns="http://www.w3.org/2000/svg"><text>plot</text></svg>`
	if err := os.WriteFile(filepath.Join(dir, "a.svg"), []byte(svg), 0o644); err != nil {
		t.Fatal(err)
	}
	inline := `<img src="data:image/svg+xml;base64,` + base64.StdEncoding.EncodeToString([]byte(svg)) + `"`
	tests := []struct {
		name, md string
		want     []string
	}{
		{"table", "| a | b |\n|---|---:|\n| x | 1 |\n", []string{"<table>", "<th>a</th>", `<td style="text-align:right">1</td>`}},
		{"plot inlined", "![a](a.svg)\n", []string{inline}},
		{"missing plot", "![b](b.svg)\n", []string{`<img src="b.svg"`}},
		{"outside the folder", "![c](../a.svg)\n", []string{`<img src="../a.svg"`}},
		{"url", "![d](https://example.com/a.svg)\n", []string{`<img src="https://example.com/a.svg"`}},
		{"title escaped", "# x\n", []string{"<title>a &lt;b&gt;</title>", "<h1>x</h1>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := reportHTML(dir, "a <b>", tt.md)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(page), w) {
					t.Errorf("page lacks %q:\n%s", w, page)
				}
			}
		})
	}
}
