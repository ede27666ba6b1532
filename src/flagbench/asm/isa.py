"""Per-architecture instruction tables: which mnemonics load or store and how wide, which
call or branch, and (for the call slices in `mix`) which registers they define and use.

Operands come from `mix.parse`, already split; `note` is a `<symbol>` the normaliser appended
for a relocation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

WIDTH = {"b": 1, "h": 2, "w": 4, "d": 8, "s": 4, "q": 16}


@dataclass(eq=False)   # hashed by identity: `mix` counts shared instances
class Insn:
    mn: str
    ops: list[str]
    loads: list[int] = field(default_factory=list)
    stores: list[int] = field(default_factory=list)
    call: str | None = None          # "direct" / "indirect"
    branch: bool = False
    string_op: str | None = None
    target_regs: set[str] = field(default_factory=set)   # registers a call jumps through
    defs: set[str] = field(default_factory=set)
    uses: set[str] = field(default_factory=set)
    symbolic: bool = False           # refers to a symbol (<...>)


# ---------------------------------------------------------------- x86_64 (AT&T)
_X86_PREFIX = {"lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd", "data16", "cs", "ds",
               "es", "ss", "fs", "gs", "addr32", "rex", "rex.W", "xacquire", "xrelease"}
_X86_SUFFIXABLE = {"mov", "add", "sub", "and", "or", "xor", "cmp", "test", "adc", "sbb", "inc", "dec",
                   "neg", "not", "push", "pop", "shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr",
                   "imul", "mul", "div", "idiv", "xchg", "xadd", "cmpxchg", "bt", "bts", "btr", "btc",
                   "movnti", "movbe", "nop", "lea", "call", "jmp"}
# the suffix is optional: objdump writes `rep stos %rax,%es:(%rdi)`, its width in the register
_X86_STRING = re.compile(r"^(movs|stos|lods|scas|cmps|ins|outs)[bwlq]?$")
_X86_READONLY = re.compile(r"^(cmp|test|bt|ucomis|comis|mul|imul|div|idiv|cmov|push|jmp|call|movs|movz|cvt)")
_X86_NOMEM = re.compile(r"^(lea|nop|prefetch|clflush|clwb|invlpg|endbr|ud)")
_X86_REG = re.compile(r"%([a-z0-9]+)")
_X86_IGNORE = {"rip", "rsp", "esp"}


@cache   # a few dozen registers, asked about for every instruction shape
def _x86_regwidth(reg: str) -> int | None:
    if reg.startswith(("xmm",)):
        return 16
    if reg.startswith("ymm"):
        return 32
    if reg.startswith("zmm"):
        return 64
    if reg.startswith("mm"):
        return 8
    if re.fullmatch(r"r\d+", reg) or (reg.startswith("r") and len(reg) == 3):
        return 8
    if re.fullmatch(r"r\d+d", reg) or (reg.startswith("e") and len(reg) == 3):
        return 4
    if re.fullmatch(r"r\d+w", reg) or reg in ("ax", "bx", "cx", "dx", "si", "di", "sp", "bp"):
        return 2
    if re.fullmatch(r"r\d+b", reg) or reg in ("al", "ah", "bl", "bh", "cl", "ch", "dl", "dh", "sil", "dil", "bpl", "spl"):
        return 1
    return None


@cache
def _x86_canon(reg: str) -> str:
    """rax/eax/ax/al -> a; r8/r8d -> r8: enough for the call slice."""
    m = re.fullmatch(r"(r\d+)[dwb]?", reg)
    if m:
        return m.group(1)
    return {"al": "ax", "ah": "ax", "bl": "bx", "bh": "bx", "cl": "cx", "ch": "cx", "dl": "dx", "dh": "dx",
            "sil": "si", "dil": "di"}.get(reg, reg[-2:] if len(reg) == 3 else reg)


def x86(mn: str, ops: list[str], note: str = "") -> Insn:
    rep = False
    while mn in _X86_PREFIX and ops:   # "rep movsq %ds:(%rsi),%es:(%rdi)" parsed as mn "rep"
        rep |= mn.startswith("rep")
        first, _, rest = ops[0].partition(" ")
        mn, ops = first, ([rest.strip()] if rest.strip() else []) + ops[1:]
    insn = Insn(mn, ops)
    joined = ",".join(ops)
    if _X86_STRING.match(mn) and ("%es:(" in joined or "%ds:(" in joined or not ops or rep):
        insn.string_op = ("rep " if rep else "") + mn
        return insn
    insn.symbolic = "<" in joined or bool(note)
    regs_by_op = [_X86_REG.findall(o) for o in ops]
    mem = [i for i, o in enumerate(ops) if not o.startswith(("$", "*%")) and
           (not o.startswith("%") or ":" in o) and not (o.startswith("<") and o.endswith(">"))]
    if mn.startswith("call"):
        insn.call = "indirect" if ops and ops[0].startswith("*") else "direct"
        if insn.call == "indirect":
            insn.target_regs = {_x86_canon(r) for r in regs_by_op[0] if r not in _X86_IGNORE}
            if "(" in ops[0] or "<" in ops[0]:
                insn.loads.append(8)
        return insn
    if mn.startswith("j"):
        insn.branch = True
        if ops and ops[0].startswith("*") and ("(" in ops[0] or "<" in ops[0]):
            insn.loads.append(8)
        return insn
    if mn in ("ret", "retq", "leave", "leaveq"):
        return insn
    if mn.startswith("push"):
        insn.stores.append(8)
        if mem:
            insn.loads.append(8)
        return insn
    if mn.startswith("pop"):
        insn.loads.append(8)
        if mem:
            insn.stores.append(8)
        return insn
    # defs/uses for call slices: AT&T writes the destination last
    if ops and ops[-1].startswith("%") and ":" not in ops[-1]:
        insn.defs = {_x86_canon(r) for r in regs_by_op[-1]}
    insn.uses = {_x86_canon(r) for rs in regs_by_op[:-1] for r in rs if r not in _X86_IGNORE}
    if not mem or _X86_NOMEM.match(mn):
        return insn
    i = mem[0]
    width = _x86_width(mn, ops, i)
    last = i == len(ops) - 1
    if mn.startswith("set"):
        insn.stores.append(1)
    elif mn.startswith(("mov", "vmov", "cvt", "vcvt", "stmxcsr")) and not mn.startswith(("movs", "movz")) or \
            re.match(r"^movs[sd]$", mn):
        (insn.stores if last else insn.loads).append(width)
    elif re.match(r"^mov[sz][bwl][wlq]$", mn):
        insn.loads.append(width)
    elif _X86_READONLY.match(mn) and not mn.startswith(("btr", "bts", "btc")):
        insn.loads.append(width)
    else:
        insn.loads.append(width)
        if last:
            insn.stores.append(width)
    return insn


def _x86_width(mn: str, ops: list[str], mem_index: int) -> int:
    m = re.match(r"^mov[sz]([bwl])[wlq]$", mn)
    if m:
        return {"b": 1, "w": 2, "l": 4}[m.group(1)]
    if mn.endswith("ss") and len(mn) > 3:
        return 4
    if mn.endswith("sd") and len(mn) > 3:
        return 8
    if mn in ("movd", "vmovd"):
        return 4
    if mn[-1:] in "bwlq" and mn[:-1] in _X86_SUFFIXABLE or mn in ("movq", "vmovq"):
        return {"b": 1, "w": 2, "l": 4, "q": 8}[mn[-1]]
    for j, o in enumerate(ops):
        if j != mem_index and o.startswith("%"):
            w = _x86_regwidth(o[1:])
            if w:
                return w
    return 8


# ---------------------------------------------------------------- aarch64
_A64_REGW = {"w": 4, "x": 8, "b": 1, "h": 2, "s": 4, "d": 8, "q": 16}
_A64_REG = re.compile(r"\b([wxqdsbhv])(\d+)\b|\b(sp|wsp|xzr|wzr|lr)\b")


def _a64_regs(text: str) -> set[str]:
    out = set()
    for m in _A64_REG.finditer(text):
        if m.group(2) is not None and m.group(1) in "wx":
            out.add("r" + m.group(2))
        elif m.group(2) is not None:
            out.add("v" + m.group(2))
    return out


def aarch64(mn: str, ops: list[str], note: str = "") -> Insn:
    insn = Insn(mn, ops)
    insn.symbolic = bool(note) or any("<" in o for o in ops)
    def regw(o: str) -> int:
        return _A64_REGW.get(o[:1], 8)
    if mn == "bl":
        insn.call = "direct"
        return insn
    if mn.startswith("blr"):
        insn.call = "indirect"
        insn.target_regs = _a64_regs(ops[0]) if ops else set()
        return insn
    if mn in ("b", "br", "cbz", "cbnz", "tbz", "tbnz") or mn.startswith("b."):
        insn.branch = True
        return insn
    atomic = re.match(r"^(ld(add|clr|eor|set|smax|smin|umax|umin)|swp|cas)(a|al|l)?(b|h)?$", mn)
    if atomic:
        w = {"b": 1, "h": 2}.get(atomic.group(4) or "", regw(ops[0]) if ops else 8)
        insn.loads.append(w)
        insn.stores.append(w)
        return insn
    m = re.match(r"^ld(?:r|ur|ar|xr|axr|apr|apur|tr|p|np|xp|axp|psw)(s?[bhw])?$", mn)
    if m and mn not in ("ldp", "ldnp", "ldxp", "ldaxp", "ldpsw") and m.group(1):
        insn.loads.append(WIDTH[m.group(1)[-1]] if m.group(1)[-1] != "w" else 4)
    elif mn in ("ldp", "ldnp", "ldxp", "ldaxp"):
        insn.loads.append(2 * regw(ops[0]))
    elif mn == "ldpsw":
        insn.loads.append(8)
    elif m:
        insn.loads.append(regw(ops[0]))
    elif re.match(r"^ld[1-4]r?$", mn):
        insn.loads.append(16)
    s = re.match(r"^st(?:r|ur|lr|xr|lxr|lur|tr|p|np|xp|lxp)([bh])?$", mn)
    if s:
        data = ops[1] if mn.startswith(("stxr", "stlxr", "stxp", "stlxp")) else ops[0]
        w = WIDTH[s.group(1)] if s.group(1) else regw(data)
        insn.stores.append(2 * w if mn.endswith("p") else w)
    elif re.match(r"^st[1-4]$", mn):
        insn.stores.append(16)
    if not insn.stores and ops and not mn.startswith(("cmp", "cmn", "tst", "prfm", "ret")):
        insn.defs = _a64_regs(ops[0])
        insn.uses = set().union(*(_a64_regs(o) for o in ops[1:])) if len(ops) > 1 else set()
    return insn


# ---------------------------------------------------------------- arm (arm and thumb)
_ARM_COND = {"eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le", "al"}
_ARM_REG = re.compile(r"\b(r\d+|sp|lr|ip|fp|pc|sl|sb)\b")


def _arm_reglist_count(ops: list[str]) -> int:
    text = ",".join(ops)
    inner = text[text.find("{") + 1:text.find("}")] if "{" in text else ""
    n = 0
    for part in inner.split(","):
        part = part.strip()
        m = re.fullmatch(r"[rdsq]?(\d+)-[rdsq]?(\d+)", part)
        n += int(m.group(2)) - int(m.group(1)) + 1 if m else (1 if part else 0)
    return n


def arm(mn: str, ops: list[str], note: str = "") -> Insn:
    base = mn.split(".")[0] if not mn.startswith(("vld", "vst")) else mn.split(".")[0]
    insn = Insn(mn, ops)
    insn.symbolic = bool(note) or any("<" in o for o in ops)
    cond_strip = base[:-2] if base[-2:] in _ARM_COND and len(base) > 3 else base
    if base == "bl" or base.startswith("blx") or (base[:2] == "bl" and base[2:] in _ARM_COND):
        direct = base.startswith("bl") and not (base.startswith("blx") and ops and _ARM_REG.fullmatch(ops[0]))
        insn.call = "direct" if direct else "indirect"
        if not direct:
            insn.target_regs = {ops[0]}
        return insn
    if base == "b" or (base[:1] == "b" and base[1:] in _ARM_COND) or base in ("cbz", "cbnz", "tbb", "tbh") \
            or (cond_strip == "bx" and ops and ops[0] != "lr"):
        insn.branch = True
        return insn
    nregs = _arm_reglist_count(ops)
    if cond_strip in ("pop", "ldm", "ldmia", "ldmib", "ldmda", "ldmdb", "ldmfd", "ldmea"):
        insn.loads.append(4 * max(nregs, 1))
    elif cond_strip in ("push", "stm", "stmia", "stmib", "stmda", "stmdb", "stmfd", "stmea"):
        insn.stores.append(4 * max(nregs, 1))
    elif cond_strip in ("vpop", "vldmia", "vldmdb", "vldm", "vpush", "vstmia", "vstmdb", "vstm"):
        w = (8 if "d" in ",".join(ops) else 4) * max(nregs, 1)
        (insn.loads if cond_strip.startswith(("vpop", "vld")) else insn.stores).append(w)
    elif cond_strip in ("vldr", "vstr"):
        w = 8 if ops and ops[0].startswith("d") else 4
        (insn.loads if cond_strip == "vldr" else insn.stores).append(w)
    elif cond_strip.startswith(("vld1", "vld2", "vld3", "vld4")):
        insn.loads.append(8 * max(nregs, 1))
    elif cond_strip.startswith(("vst1", "vst2", "vst3", "vst4")):
        insn.stores.append(8 * max(nregs, 1))
    else:
        m = re.fullmatch(r"(ldr|str)(ex)?(s?b|s?h|d)?(t)?", cond_strip)
        if m:
            w = {"b": 1, "h": 2, "d": 8}.get((m.group(3) or "w")[-1], 4)
            (insn.loads if m.group(1) == "ldr" else insn.stores).append(w)
    if not insn.stores and ops:
        insn.defs = set(_ARM_REG.findall(ops[0]))
        insn.uses = set(_ARM_REG.findall(",".join(ops[1:])))
        if len(ops) == 2 and not cond_strip.startswith(("mov", "ldr", "cmp", "cmn", "tst", "teq", "mvn")):
            insn.uses |= insn.defs    # thumb two-operand form: "add r3, pc" reads r3 too
    return insn


# ---------------------------------------------------------------- riscv64
_RV_LOAD = re.compile(r"^(?:c\.)?(f?l[bhwdq]u?|lr\.[wd])(?:sp)?(?:\.aq|\.rl|\.aqrl)*$")
_RV_STORE = re.compile(r"^(?:c\.)?(f?s[bhwdq]|sc\.[wd])(?:sp)?(?:\.aq|\.rl|\.aqrl)*$")
_RV_REG = re.compile(r"\b(ra|sp|gp|tp|t[0-6]|s\d+|a[0-7]|fp|f[tsa]\d+)\b")
_RV_BRANCH = {"beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "blez", "bgez", "bltz", "bgtz",
              "bgt", "ble", "bgtu", "bleu", "j", "c.j", "c.beqz", "c.bnez", "tail"}


def riscv64(mn: str, ops: list[str], note: str = "") -> Insn:
    insn = Insn(mn, ops)
    insn.symbolic = bool(note) or any("<" in o for o in ops)
    if mn in ("call", "jal", "c.jal") and not (mn == "jal" and ops and ops[0] == "zero"):
        insn.call = "direct"
        return insn
    if mn in ("jalr", "c.jalr") and (len(ops) == 1 or (ops and ops[0] == "ra")):
        reg = ops[-1].split("(")[-1].rstrip(")") if ops else "ra"
        insn.call = "indirect"
        insn.target_regs = {reg}
        return insn
    if mn in _RV_BRANCH or (mn in ("jr", "c.jr") and ops and ops[0] != "ra"):
        insn.branch = True
        return insn
    amo = re.match(r"^amo\w+\.([wd])", mn)
    if amo:
        insn.loads.append(WIDTH[amo.group(1)])
        insn.stores.append(WIDTH[amo.group(1)])
        return insn
    m = _RV_LOAD.match(mn)
    if m and mn not in ("li", "lui", "la", "lla"):
        insn.loads.append(WIDTH[m.group(1).split(".")[-1][0] if "." in m.group(1) else m.group(1).rstrip("u")[-1]])
    s = _RV_STORE.match(mn)
    if s and mn not in ("sll", "sra", "srl", "sub", "seqz", "snez", "sltz", "sgtz"):
        insn.stores.append(WIDTH[s.group(1).split(".")[-1][0] if "." in s.group(1) else s.group(1)[-1]])
    if not insn.stores and ops:
        insn.defs = set(_RV_REG.findall(ops[0]))
        insn.uses = set(_RV_REG.findall(",".join(ops[1:]))) - {"gp", "tp", "sp"}
    return insn


# ---------------------------------------------------------------- loongarch64
_LA_LOAD = re.compile(r"^(?:ld|ldx|ldptr|ldgt|ldle|fld|fldx|fldgt|fldle|ll)\.([bhwd]u?|s)$")
_LA_STORE = re.compile(r"^(?:st|stx|stptr|stgt|stle|fst|fstx|fstgt|fstle|sc)\.([bhwd]|s)$")
_LA_REG = re.compile(r"\$(\w+)")
_LA_BRANCH = {"b", "beq", "bne", "blt", "bge", "bltu", "bgeu", "beqz", "bnez", "bceqz", "bcnez", "bgt", "ble",
              "bgtu", "bleu"}


def loongarch64(mn: str, ops: list[str], note: str = "") -> Insn:
    insn = Insn(mn, ops)
    insn.symbolic = bool(note) or any("<" in o for o in ops)
    regs = [_LA_REG.findall(o) for o in ops]
    if mn == "bl":
        insn.call = "direct"
        return insn
    if mn == "jirl" and ops and ops[0] == "$ra":
        insn.call = "indirect"
        insn.target_regs = set(regs[1]) if len(regs) > 1 else set()
        return insn
    if mn in _LA_BRANCH or (mn == "jr" and ops and ops[0] != "$ra") or (mn == "jirl" and len(ops) > 1 and ops[1] != "$ra"):
        insn.branch = True
        return insn
    amo = re.match(r"^am\w+?(?:_db)?\.([wd])u?$", mn)
    if amo:
        insn.loads.append(WIDTH[amo.group(1)])
        insn.stores.append(WIDTH[amo.group(1)])
        return insn
    m = _LA_LOAD.match(mn)
    if m:
        insn.loads.append(WIDTH[m.group(1)[0]] if not mn.startswith("fld") else {"s": 4, "d": 8}[m.group(1)[0]])
    elif mn in ("vld", "vldx"):
        insn.loads.append(16)
    elif mn in ("xvld", "xvldx"):
        insn.loads.append(32)
    s = _LA_STORE.match(mn)
    if s:
        insn.stores.append(WIDTH[s.group(1)[0]] if not mn.startswith("fst") else {"s": 4, "d": 8}[s.group(1)[0]])
    elif mn in ("vst", "vstx"):
        insn.stores.append(16)
    elif mn in ("xvst", "xvstx"):
        insn.stores.append(32)
    if not insn.stores and regs:
        insn.defs = set(regs[0])
        insn.uses = {r for rs in regs[1:] for r in rs} - {"zero", "sp", "tp"}
    return insn


# ---------------------------------------------------------------- hppa, hppa64
_PA_LOAD = re.compile(r"^f?ld([bhwd])(?:s|x|m|a)?$")
_PA_STORE = re.compile(r"^f?st([bhwd])(?:s|x|m|a|by)?$")
_PA_REG = re.compile(r"\b(r\d+|rp|sp|dp|ret0|ret1|arg\d|fr\d+\w?)\b")
_PA_BRANCH = re.compile(r"^(b|bv|bve|be|bb|bvb|movb|movib|comb[tf]?|comib[tf]?|cmpb|cmpib|addb[tf]?|addib[tf]?|blr)$")


def hppa(mn: str, ops: list[str], note: str = "") -> Insn:
    base, _, completers = mn.partition(",")
    insn = Insn(mn, ops)
    joined = ",".join(ops)
    insn.symbolic = "<" in joined or bool(note)
    dyncall = "$$dyncall" in joined + note
    link = ("l" in completers.split(",")) or base == "bl"
    if base in ("b", "bl", "be", "bve", "ble") and (link or base == "ble"):
        last = ops[-1] if ops else ""
        if base in ("b", "bl") and last == "r0":
            insn.branch = True
            return insn
        if base in ("b", "bl") and not dyncall:
            insn.call = "direct"
            return insn
        insn.call = "indirect"
        target = set(_PA_REG.findall(ops[0])) if ops else set()
        insn.target_regs = (target | {"r22"}) if dyncall else target   # $$dyncall jumps through r22
        return insn
    if base in ("bv", "bve") and joined.replace(" ", "") in ("r0(rp)", "(rp)", "r0(r2)", "(r2)"):
        return insn   # return
    if _PA_BRANCH.match(base):
        insn.branch = True
        return insn
    if base in ("ldcw", "ldcd"):
        w = 4 if base == "ldcw" else 8
        insn.loads.append(w)
        insn.stores.append(w)
    m = _PA_LOAD.match(base)
    if m:
        insn.loads.append(WIDTH[m.group(1)])
    s = _PA_STORE.match(base)
    if s:
        w = WIDTH[s.group(1)]
        insn.stores.append(4 if base == "stby" else w)
    if not insn.stores and ops and _PA_REG.fullmatch(ops[-1]):
        insn.defs = {ops[-1]}
        insn.uses = set(_PA_REG.findall(",".join(ops[:-1]))) - {"dp", "sp", "r0", "r27", "r30"}
    return insn


# by instruction-set family: a Target names its own (targets.py: Target.isa)
CLASSIFIERS = {"x86": x86, "aarch64": aarch64, "arm": arm, "riscv64": riscv64,
               "loongarch64": loongarch64, "hppa": hppa}
