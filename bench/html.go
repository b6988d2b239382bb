package bench

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// ReportHTMLFile is the HTML twin of report.md, written beside it: the same
// report with its plots inline, so the one file opens from disk (or as a
// CI artifact) with nothing else.
const ReportHTMLFile = "report.html"

// reportStyle is the HTML report's stylesheet (inline: the file stands
// alone).
const reportStyle = `body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#1d232b}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d9dde2;padding:.2em .6em}th{background:#f1f3f5}
td{font-variant-numeric:tabular-nums}code{background:#f1f3f5;padding:0 .2em;border-radius:3px}img{max-width:100%}`

// imgSrc finds the image sources goldmark writes.
var imgSrc = regexp.MustCompile(`<img src="([^"]+)"`)

// reportHTML renders a report's Markdown as a standalone HTML page: GFM
// tables by goldmark, and every image that is a file of dir (the SVG plots)
// inlined as a data URI. An image that cannot be read keeps its link.
func reportHTML(dir, title, md string) ([]byte, error) {
	var body bytes.Buffer
	gm := goldmark.New(goldmark.WithExtensions(extension.Table))
	if err := gm.Convert([]byte(md), &body); err != nil {
		return nil, fmt.Errorf("bench: rendering the HTML report: %w", err)
	}
	inlined := imgSrc.ReplaceAllFunc(body.Bytes(), func(m []byte) []byte {
		src := html.UnescapeString(string(imgSrc.FindSubmatch(m)[1]))
		if filepath.IsAbs(src) || !filepath.IsLocal(src) || filepath.Ext(src) != ".svg" {
			return m
		}
		data, err := os.ReadFile(filepath.Join(dir, src))
		if err != nil {
			return m
		}
		return []byte(`<img src="data:image/svg+xml;base64,` + base64.StdEncoding.EncodeToString(data) + `"`)
	})
	var out bytes.Buffer
	fmt.Fprintf(&out, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n",
		html.EscapeString(title), reportStyle)
	out.Write(inlined)
	out.WriteString("</body>\n</html>\n")
	return out.Bytes(), nil
}

// writeReportFiles writes report.md and its HTML twin report.html to dir.
func writeReportFiles(dir, title, md string) error {
	if err := writeFileAtomic(filepath.Join(dir, ReportFile), []byte(md)); err != nil {
		return err
	}
	page, err := reportHTML(dir, title, md)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ReportHTMLFile), page)
}
