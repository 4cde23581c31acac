"""The desk's vault tool (MCP, one server for a whole evaluation). It answers every try: the limit on tries is
the reward's to count (service_desk/__init__.py)."""

import verifiers.v1 as vf

from service_desk.desk import CODES, vault_code


class VaultToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = "vault"

    @vf.tool
    def try_code(self, vault: str, code: int) -> str:
        """Try one code on a vault, e.g. try_code(vault="V-1000", code=5). Codes are whole numbers from 1 to 12."""
        if not 1 <= code <= CODES:
            return f"{vault}: there is no code {code}"
        return f"{vault}: code {code} " + ("opens the vault" if code == vault_code(vault) else "is wrong")


if __name__ == "__main__":
    VaultToolset.run()
