// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title A smart-contract wallet for tests: its owner makes it call any contract (it is then the
/// `msg.sender`), chooses what it does when it is sent ETH, and signs for it (ERC-1271).
contract TestWallet {
    /// Accept takes ETH; Refuse reverts; BurnGas spins until the call runs out of gas.
    enum OnReceive { Accept, Refuse, BurnGas }

    address public immutable owner;
    OnReceive public onReceive;

    error NotOwner();
    error Refused();

    constructor(OnReceive onReceive_) {
        owner = msg.sender;
        onReceive = onReceive_;
    }

    modifier onlyOwner() {
        if (msg.sender != owner) revert NotOwner();
        _;
    }

    function setOnReceive(OnReceive onReceive_) external onlyOwner {
        onReceive = onReceive_;
    }

    /// @notice Calls `to` with `value` wei (sent along with this call) and `data`; a revert is passed on as is.
    function execute(address to, uint256 value, bytes calldata data) external payable onlyOwner returns (bytes memory ret) {
        bool ok;
        (ok, ret) = to.call{value: value}(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(ret, 0x20), mload(ret))
            }
        }
    }

    /// @notice ERC-1271: the owner's signature of `hash` is the wallet's signature.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        return ecrecover(hash, v, r, s) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }

    receive() external payable {
        if (onReceive == OnReceive.Refuse) revert Refused();
        if (onReceive == OnReceive.BurnGas) {
            uint256 i;
            while (true) i++;
        }
    }
}
