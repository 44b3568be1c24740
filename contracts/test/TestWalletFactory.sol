// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title A smart-contract wallet made by `TestWalletFactory`: its owner's signature is the
/// wallet's (ERC-1271), before it exists too, through an ERC-6492 wrapper naming the factory.
contract CounterfactualWallet {
    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    /// @notice ERC-1271: the owner's signature of `hash` is the wallet's signature.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        return ecrecover(hash, v, r, s) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}

/// @title A wallet factory for sign-in tests (ERC-6492): `deploy` makes the owner's wallet at a
/// CREATE2 address known in advance, after burning `burnGas` gas first, as a hostile factory
/// would (`type(uint256).max` spins until the call runs out of gas).
contract TestWalletFactory {
    function deploy(address owner, bytes32 salt, uint256 burnGas) external returns (address wallet) {
        if (burnGas == type(uint256).max) {
            uint256 i;
            while (true) i++;
        }
        // Reverts (underflow) when the call has less gas than it is to burn.
        uint256 until = gasleft() - burnGas;
        while (gasleft() > until) {}
        wallet = address(new CounterfactualWallet{salt: salt}(owner));
    }

    /// @notice Where `deploy(owner, salt, …)` puts the wallet.
    function walletAddress(address owner, bytes32 salt) external view returns (address) {
        bytes32 code = keccak256(abi.encodePacked(type(CounterfactualWallet).creationCode, abi.encode(owner)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, code)))));
    }
}
