"""The catalog tool server (MCP). Taskset-scoped: one server for a whole evaluation."""

import verifiers.v1 as vf

from candidate_env.catalog import coupon_text, price_text


class CatalogToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = "catalog"

    @vf.tool
    def price(self, item: str) -> str:
        """Unit price of a catalog item, e.g. price(item="blue ceramic mug")."""
        return price_text(item)

    @vf.tool
    def coupon(self, code: str) -> str:
        """The discount a coupon code gives on the whole order, e.g. coupon(code="SAVE10B")."""
        return coupon_text(code)


if __name__ == "__main__":
    CatalogToolset.run()
