"""The warehouse tool server (MCP). Taskset-scoped: one server for a whole evaluation."""

import verifiers.v1 as vf

from candidate_env.warehouse import list_text, stock_text


class WarehouseToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = "warehouse"

    @vf.tool
    def stock(self, sku: str) -> str:
        """Units of one SKU in stock, e.g. stock(sku="SKU-4821") returns "SKU-4821: <count> units"."""
        return stock_text(sku)

    @vf.tool
    def list_skus(self, prefix: str) -> str:
        """The warehouse's SKUs that start with a prefix (at most 25), e.g. list_skus(prefix="SKU-48")."""
        return list_text(prefix)


if __name__ == "__main__":
    WarehouseToolset.run()
