#include "meshtrain/train/serial_weights.h"

#include <map>
#include <string>

#include "meshtrain/core/dtype.h"

namespace meshtrain {

template <class T>
std::vector<float> gather_serial_weights(ShardedState<T>& state, ProcessMesh& mesh, const ModelConfig& m) {
  ParallelConfig serial;
  const Layout full = Layout::build(m, serial, 0, 0);
  std::map<std::string, const ParamSpec*> where;
  for (const Unit& u : full.units())
    for (const ParamSpec& s : u.params) where[s.name] = &s;
  std::vector<float> out(full.numel(), 0.0f);
  const RankCoord c = mesh.coord();
  for (const Unit& u : state.layout().units()) {
    if (u.name == "head.word") continue;
    state.gather(u);
    for (const ParamSpec& s : u.params) {
      if (c.dp != 0 || (s.tp_replicated() && c.tp != 0)) continue;
      const ParamSpec& f = *where.at(s.name);
      const T* w = state.weights(u) + (s.offset - u.offset);
      for (int64_t i = 0; i < s.numel(); ++i) {
        const int64_t gi = s.row_offset + i / s.local_cols, gj = s.col_offset + i % s.local_cols;
        out[f.offset + gi * f.cols + gj] = to_f32(w[i]);
      }
    }
    state.release(u);
  }
  mesh.world().all_reduce(out.data(), static_cast<int64_t>(out.size()));
  return out;
}

template std::vector<float> gather_serial_weights(ShardedState<float>&, ProcessMesh&, const ModelConfig&);
template std::vector<float> gather_serial_weights(ShardedState<bf16>&, ProcessMesh&, const ModelConfig&);

}  // namespace meshtrain
