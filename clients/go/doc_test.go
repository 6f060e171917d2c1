package fence

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// TestDocComments: every exported name of the package has a doc comment.
func TestDocComments(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := doc.New(pkgs["fence"], "fenced/client", 0)
	if p.Doc == "" {
		t.Error("no package comment")
	}
	need := func(what, name, d string) {
		if strings.TrimSpace(d) == "" {
			t.Errorf("%s %s has no doc comment", what, name)
		}
	}
	for _, f := range p.Funcs {
		need("func", f.Name, f.Doc)
	}
	for _, v := range append(p.Consts, p.Vars...) {
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			for _, n := range vs.Names {
				if n.IsExported() && vs.Doc == nil && vs.Comment == nil && v.Doc == "" {
					t.Errorf("%s has no doc comment", n.Name)
				}
			}
		}
	}
	for _, ty := range p.Types {
		need("type", ty.Name, ty.Doc)
		for _, f := range append(ty.Funcs, ty.Methods...) {
			need("func", ty.Name+"."+f.Name, f.Doc)
		}
		for _, v := range append(ty.Consts, ty.Vars...) {
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.IsExported() && vs.Doc == nil && vs.Comment == nil && v.Doc == "" {
						t.Errorf("%s has no doc comment", n.Name)
					}
				}
			}
		}
		if st, ok := ty.Decl.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType); ok {
			for _, fl := range st.Fields.List {
				for _, n := range fl.Names {
					if n.IsExported() && fl.Doc == nil && fl.Comment == nil {
						t.Errorf("field %s.%s has no doc comment", ty.Name, n.Name)
					}
				}
			}
		}
	}
}
