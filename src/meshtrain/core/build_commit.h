// The source revision this binary was built from: `git describe --always
// --dirty` of the source tree at build time ("unknown" outside a git
// checkout), so that reports and plans name what produced them.
#pragma once

namespace meshtrain {

const char* build_commit();

}  // namespace meshtrain
