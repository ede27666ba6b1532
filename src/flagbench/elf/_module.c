/*
 * The module flagbench.elf._symtab: its functions and types, gathered from the files that
 * define them (_symtab.c: one member's tables; _scan.c: both inputs of `flagbench size`;
 * _holes.c: the code between symbols; _summary.c: bloat-o-meter's table). Only this file
 * knows them all, so none of them needs another's module table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_elf.h"
#include "_summary.h"

static PyMethodDef methods[] = {
	{ "symbols", (PyCFunction)(void (*)(void))py_symbols, METH_VARARGS | METH_KEYWORDS, symbols_doc },
	{ "entries", py_entries, METH_O, entries_doc },
	{ "section_sizes", py_section_sizes, METH_VARARGS, section_sizes_doc },
	{ "code_holes", code_holes, METH_VARARGS, code_holes_doc },
	{ "padding_prefix", padding_prefix, METH_VARARGS, padding_prefix_doc },
	{ "scan_pair", scan_pair, METH_VARARGS, scan_pair_doc },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "flagbench.elf._symtab",
	.m_doc = "The per-entry loops of flagbench.elf (symbol tables, section headers).",
	.m_size = -1,
	.m_methods = methods,
};

PyMODINIT_FUNC PyInit__symtab(void)
{
	PyObject *m;

	if (PyType_Ready(&SummaryType) < 0)
		return NULL;
	m = PyModule_Create(&module);
	if (m && (PyModule_AddObjectRef(m, "Summary", (PyObject *)&SummaryType) < 0 || add_holes_constants(m) < 0))
		Py_CLEAR(m);
	return m;
}
