// Prints what @huggingface/gguf reads from a local GGUF file, one line per
// fact, for tests/tools/test_gguf_node.c to compare with o1d's own reader:
//   data OFFSET            the tensor data section's start
//   kv KEY VALUE           general.file_type, general.quantization_version
//   tensor NAME TYPE NE0,NE1,... OFFSET
import { gguf } from "@huggingface/gguf";

const file = process.argv[2];
const out = await gguf(file, { allowLocalFile: true });
const lines = [`data ${out.tensorDataOffset}`];
for (const key of ["general.file_type", "general.quantization_version"]) {
  if (key in out.metadata) lines.push(`kv ${key} ${out.metadata[key]}`);
}
for (const t of out.tensorInfos) {
  lines.push(`tensor ${t.name} ${t.dtype} ${t.shape.join(",")} ${t.offset}`);
}
console.log(lines.join("\n"));
