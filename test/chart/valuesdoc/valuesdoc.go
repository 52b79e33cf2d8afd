// Package valuesdoc turns a chart's values.yaml into the values table of its
// README, from `# --` comments in the style of helm-docs: a comment block
// directly above a key whose first line starts with `# --` documents that key
// (the description runs to the key), and a `# @default -- text` line in the
// block replaces the default shown. Keys below a documented key need no
// comment of their own, but may have one to get their own row.
package valuesdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Value is one documented key of values.yaml.
type Value struct {
	// Key is the dotted path, e.g. "image.repository".
	Key string
	// Type is the YAML type of the default: string, int, float, bool, list,
	// object, or the type named in the comment as `# -- (type) text`.
	Type string
	// Default is the default as compact JSON, or the `@default` text.
	Default string
	// Description is the comment text, its lines joined by spaces.
	Description string
}

// Values is what Parse finds in a values.yaml.
type Values struct {
	// Documented lists the documented keys in file order.
	Documented []Value
	// Undocumented lists the keys that hold a value (a scalar, a list, an
	// empty map) with no documented key above them, so that nobody can add
	// a setting without explaining it.
	Undocumented []string
}

// Parse reads values.yaml.
func Parse(valuesYAML []byte) (Values, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return Values{}, fmt.Errorf("parse values: %w", err)
	}
	if len(doc.Content) == 0 {
		return Values{}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return Values{}, fmt.Errorf("values: the top level is a %s, want a map", kindName(root))
	}
	p := parser{lines: strings.Split(string(valuesYAML), "\n")}
	if err := p.walk(root, "", false); err != nil {
		return Values{}, err
	}
	return p.out, nil
}

type parser struct {
	lines []string
	out   Values
}

func (p *parser) walk(m *yaml.Node, prefix string, covered bool) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		keyNode, val := m.Content[i], m.Content[i+1]
		key := keyNode.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		c, err := p.commentAbove(keyNode.Line)
		if err != nil {
			return fmt.Errorf("values: %s: %w", key, err)
		}
		documented := c.description != ""
		if documented {
			v, err := row(key, val, c)
			if err != nil {
				return err
			}
			p.out.Documented = append(p.out.Documented, v)
		}
		if val.Kind == yaml.MappingNode && len(val.Content) > 0 {
			if err := p.walk(val, key, covered || documented); err != nil {
				return err
			}
			continue
		}
		if !covered && !documented {
			p.out.Undocumented = append(p.out.Undocumented, key)
		}
	}
	return nil
}

type comment struct {
	typ, description, def string
}

// commentAbove reads the comment block that ends on the line above line
// (1-based) and keeps what follows its `# --` line.
func (p *parser) commentAbove(line int) (comment, error) {
	var block []string
	for n := line - 2; n >= 0; n-- {
		t := strings.TrimSpace(p.lines[n])
		if !strings.HasPrefix(t, "#") {
			break
		}
		block = append([]string{t}, block...)
	}
	start := -1
	for i, l := range block {
		if strings.HasPrefix(l, "# --") {
			start = i
		}
	}
	if start < 0 {
		return comment{}, nil
	}
	var c comment
	var desc []string
	first := strings.TrimSpace(strings.TrimPrefix(block[start], "# --"))
	if strings.HasPrefix(first, "(") {
		end := strings.Index(first, ")")
		if end < 0 {
			return comment{}, fmt.Errorf("unclosed type in %q", block[start])
		}
		c.typ, first = first[1:end], strings.TrimSpace(first[end+1:])
	}
	desc = append(desc, first)
	for _, l := range block[start+1:] {
		text := strings.TrimSpace(strings.TrimPrefix(l, "#"))
		if d, ok := strings.CutPrefix(text, "@default --"); ok {
			c.def = strings.TrimSpace(d)
			continue
		}
		desc = append(desc, text)
	}
	c.description = strings.TrimSpace(strings.Join(desc, " "))
	if c.description == "" {
		return comment{}, fmt.Errorf("the `# --` comment has no text")
	}
	return c, nil
}

func row(key string, val *yaml.Node, c comment) (Value, error) {
	v := Value{Key: key, Type: c.typ, Default: c.def, Description: c.description}
	if v.Type == "" {
		v.Type = typeOf(val)
	}
	if v.Default == "" {
		var x any
		if err := val.Decode(&x); err != nil {
			return Value{}, fmt.Errorf("values: %s: %w", key, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(x); err != nil {
			return Value{}, fmt.Errorf("values: %s: %w", key, err)
		}
		v.Default = strings.TrimSuffix(buf.String(), "\n")
	}
	return v, nil
}

func typeOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "int"
		case "!!float":
			return "float"
		case "!!bool":
			return "bool"
		case "!!null":
			return "null"
		}
		return "string"
	}
	return kindName(n)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "map"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "scalar"
}

// Chart is what a README template may say about the chart besides its values.
type Chart struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion"`
	KubeVersion string `json:"kubeVersion"`
	Description string `json:"description"`
}

// README renders tmpl, a text/template, with the chart's fields and
// {{ .ValuesTable }}, the markdown table of the documented values.
func README(tmpl []byte, chart Chart, values []Value) ([]byte, error) {
	t, err := template.New("README.md.gotmpl").Option("missingkey=error").Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("parse README template: %w", err)
	}
	data := struct {
		Chart
		ValuesTable string
	}{chart, Table(values)}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render README: %w", err)
	}
	return buf.Bytes(), nil
}

// Table renders values as a markdown table.
func Table(values []Value) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n")
	b.WriteString("|-----|------|---------|-------------|\n")
	for _, v := range values {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(v.Key), v.Type, code(v.Default), cell(v.Description))
	}
	return b.String()
}

// code puts s in a code span; a pipe would end the table cell even there.
func code(s string) string {
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// Files a chart directory holds for Generate.
const (
	ChartFile    = "Chart.yaml"
	ValuesFile   = "values.yaml"
	TemplateFile = "README.md.gotmpl"
	READMEFile   = "README.md"
)

// Generate renders the README of the chart in chartDir from its
// README.md.gotmpl, Chart.yaml and values.yaml. It refuses a values.yaml
// with undocumented keys, naming them.
func Generate(chartDir string) ([]byte, error) {
	read := func(name string) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(chartDir, name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return data, nil
	}
	chartYAML, err := read(ChartFile)
	if err != nil {
		return nil, err
	}
	var chart Chart
	if err := sigsyaml.Unmarshal(chartYAML, &chart); err != nil {
		return nil, fmt.Errorf("parse %s: %w", ChartFile, err)
	}
	valuesYAML, err := read(ValuesFile)
	if err != nil {
		return nil, err
	}
	values, err := Parse(valuesYAML)
	if err != nil {
		return nil, err
	}
	if len(values.Undocumented) > 0 {
		return nil, errors.New("values.yaml: no `# --` comment documents " + strings.Join(values.Undocumented, ", ") +
			": add one above each key (or above a key that contains it)")
	}
	tmpl, err := read(TemplateFile)
	if err != nil {
		return nil, err
	}
	return README(tmpl, chart, values.Documented)
}
