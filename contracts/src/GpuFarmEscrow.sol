// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

interface IERC20 {
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

/// @title gpufarm escrow: one deposit per job, paid out after a challenge window.
/// @notice A customer funds a job from their own wallet (ETH or an ERC-20). The operator records
/// the completion (final payment, fee, provider) which opens a challenge window; the customer may
/// approve early or dispute inside it; anyone releases after it. A dispute the operator does not
/// resolve within DISPUTE_TIMEOUT returns the whole deposit to the customer (anyone may send that
/// call). A canceled or failed job gets its refund authorized by the operator and claimed by the customer. Every state change emits an event;
/// every payout follows checks-effects-interactions under a reentrancy guard. No party can hold up
/// another's money: a payout that fails (a wallet that refuses ETH, a token that blocks an address)
/// is credited to its recipient, who takes it with `withdraw(token)`.
contract GpuFarmEscrow {
    enum Status { None, Funded, Completed, Disputed, RefundAuthorized, Released, Refunded }

    struct Job {
        address customer;
        address token;
        uint256 amount;
        bytes32 jobHash;
        Status status;
        address provider;
        uint256 payout;
        uint256 fee;
        uint64 computeSeconds;
        uint64 challengeEndsAt;
        uint64 disputeEndsAt;
        bytes32 resultHash;
    }

    /// Gas a payout may use: enough for a smart-contract wallet's receive or a stablecoin's
    /// transfer, bounded so a recipient cannot spend the caller's gas.
    uint256 private constant PAYOUT_GAS = 100_000;
    /// Gas that must be left before a payout so it gets all of PAYOUT_GAS (a call passes on 63/64 of
    /// what is left after its own cost, up to 36,600 for a cold, new, ETH-receiving account).
    uint256 private constant PAYOUT_GAS_NEEDED = PAYOUT_GAS * 64 / 63 + 40_000;

    /// How long the operator has to resolve a dispute; after it the dispute can only end with the
    /// whole deposit back to the customer (`claimDisputeTimeout`). See docs/decisions.md.
    uint64 public constant DISPUTE_TIMEOUT = 14 days;

    address public immutable operator;
    address public immutable treasury;
    uint64 public immutable challengeWindow;

    mapping(bytes32 => Job) private jobs;
    /// Payouts that could not be sent, by recipient and token (the zero address for ETH).
    mapping(address account => mapping(address token => uint256)) public withdrawable;
    uint256 private locked = 1;

    event JobFunded(bytes32 indexed jobKey, address indexed customer, address token, uint256 amount, bytes32 jobHash);
    event JobCompleted(bytes32 indexed jobKey, address indexed provider, uint256 payout, uint256 fee, uint64 computeSeconds, bytes32 resultHash, uint64 challengeEndsAt);
    event JobApproved(bytes32 indexed jobKey);
    event JobDisputed(bytes32 indexed jobKey, uint64 disputeEndsAt);
    event DisputeTimedOut(bytes32 indexed jobKey);
    event DisputeResolved(bytes32 indexed jobKey, uint256 payout, uint256 fee);
    event JobReleased(bytes32 indexed jobKey, address indexed provider, uint256 providerAmount, uint256 fee, uint256 customerRefund);
    event RefundAuthorized(bytes32 indexed jobKey);
    event RefundClaimed(bytes32 indexed jobKey, address indexed customer, uint256 amount);
    event PaymentDeferred(bytes32 indexed jobKey, address indexed to, address token, uint256 amount);
    event Withdrawn(address indexed account, address token, uint256 amount);

    error NotOperator();
    error NotCustomer();
    error WrongStatus(Status status);
    error AlreadyFunded();
    error BadAmount();
    error BadPayout();
    error ZeroAddress();
    error ChallengeWindowOpen();
    error ChallengeWindowClosed();
    error DisputeDeadlineNotReached();
    error DisputeDeadlinePassed();
    error TransferFailed();
    error NothingToWithdraw();
    error OutOfGas();
    error Reentrancy();

    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator();
        _;
    }

    modifier nonReentrant() {
        if (locked != 1) revert Reentrancy();
        locked = 2;
        _;
        locked = 1;
    }

    constructor(address operator_, address treasury_, uint64 challengeWindow_) {
        if (operator_ == address(0) || treasury_ == address(0)) revert ZeroAddress();
        operator = operator_;
        treasury = treasury_;
        challengeWindow = challengeWindow_;
    }

    /// @notice The key of `jobId` funded by `customer`: only that wallet's createJob lands on it.
    function jobKeyOf(address customer, bytes32 jobId) public pure returns (bytes32) {
        return keccak256(abi.encode(customer, jobId));
    }

    /// @notice Funds a job. ETH when `token` is the zero address (`msg.value == amount`), else the
    /// ERC-20 `amount` is pulled with transferFrom (approve it first).
    function createJob(bytes32 jobId, address token, uint256 amount, bytes32 jobHash) external payable nonReentrant returns (bytes32 jobKey) {
        if (amount == 0) revert BadAmount();
        jobKey = jobKeyOf(msg.sender, jobId);
        Job storage job = jobs[jobKey];
        if (job.status != Status.None) revert AlreadyFunded();
        if (token == address(0)) {
            if (msg.value != amount) revert BadAmount();
        } else if (msg.value != 0) {
            revert BadAmount();
        }
        job.customer = msg.sender;
        job.token = token;
        job.amount = amount;
        job.jobHash = jobHash;
        job.status = Status.Funded;
        emit JobFunded(jobKey, msg.sender, token, amount, jobHash);
        if (token != address(0)) _pull(token, msg.sender, amount);
    }

    /// @notice Operator: records a finished job's final payment (fee included, never above the
    /// deposit) and opens the challenge window.
    function completeJob(bytes32 jobKey, uint256 payout, uint256 fee, uint64 computeSeconds, bytes32 resultHash, address provider) external onlyOperator {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Funded) revert WrongStatus(job.status);
        if (payout > job.amount || fee > payout) revert BadPayout();
        if (provider == address(0)) revert ZeroAddress();
        uint64 endsAt = uint64(block.timestamp) + challengeWindow;
        job.status = Status.Completed;
        job.provider = provider;
        job.payout = payout;
        job.fee = fee;
        job.computeSeconds = computeSeconds;
        job.resultHash = resultHash;
        job.challengeEndsAt = endsAt;
        emit JobCompleted(jobKey, provider, payout, fee, computeSeconds, resultHash, endsAt);
    }

    /// @notice Operator: lets the customer take the whole deposit back (after a cancel or failure).
    function authorizeRefund(bytes32 jobKey) external onlyOperator {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Funded) revert WrongStatus(job.status);
        job.status = Status.RefundAuthorized;
        emit RefundAuthorized(jobKey);
    }

    /// @notice Customer: takes an authorized refund.
    function claimRefund(bytes32 jobKey) external nonReentrant {
        Job storage job = jobs[jobKey];
        if (job.status != Status.RefundAuthorized) revert WrongStatus(job.status);
        if (msg.sender != job.customer) revert NotCustomer();
        job.status = Status.Refunded;
        uint256 amount = job.amount;
        emit RefundClaimed(jobKey, job.customer, amount);
        if (!_transfer(job.token, job.customer, amount, gasleft())) revert TransferFailed();
    }

    /// @notice Customer: accepts the result before the window ends; pays out at once.
    function approve(bytes32 jobKey) external nonReentrant {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Completed) revert WrongStatus(job.status);
        if (msg.sender != job.customer) revert NotCustomer();
        emit JobApproved(jobKey);
        _release(jobKey, job);
    }

    /// @notice Customer: disputes the result inside the window; blocks release until the operator
    /// resolves it, for at most DISPUTE_TIMEOUT.
    function dispute(bytes32 jobKey) external {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Completed) revert WrongStatus(job.status);
        if (msg.sender != job.customer) revert NotCustomer();
        if (block.timestamp >= job.challengeEndsAt) revert ChallengeWindowClosed();
        uint64 endsAt = uint64(block.timestamp) + DISPUTE_TIMEOUT;
        job.status = Status.Disputed;
        job.disputeEndsAt = endsAt;
        emit JobDisputed(jobKey, endsAt);
    }

    /// @notice Operator: settles a dispute before its deadline with a new payment (at most the
    /// recorded one) and pays out.
    function resolveDispute(bytes32 jobKey, uint256 payout, uint256 fee) external onlyOperator nonReentrant {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Disputed) revert WrongStatus(job.status);
        // Past the deadline the outcome is fixed (the customer's refund): no race with its claim.
        if (block.timestamp >= job.disputeEndsAt) revert DisputeDeadlinePassed();
        if (payout > job.payout || fee > payout) revert BadPayout();
        job.payout = payout;
        job.fee = fee;
        emit DisputeResolved(jobKey, payout, fee);
        _release(jobKey, job);
    }

    /// @notice Anyone: ends a dispute left unresolved past its deadline: the whole deposit goes
    /// back to the customer, nothing to the provider, no fee.
    function claimDisputeTimeout(bytes32 jobKey) external nonReentrant {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Disputed) revert WrongStatus(job.status);
        if (block.timestamp < job.disputeEndsAt) revert DisputeDeadlineNotReached();
        job.payout = 0;
        job.fee = 0;
        emit DisputeTimedOut(jobKey);
        _release(jobKey, job);
    }

    /// @notice Anyone: pays out a completed job once its challenge window has ended.
    function release(bytes32 jobKey) external nonReentrant {
        Job storage job = jobs[jobKey];
        if (job.status != Status.Completed) revert WrongStatus(job.status);
        if (block.timestamp < job.challengeEndsAt) revert ChallengeWindowOpen();
        _release(jobKey, job);
    }

    /// @notice Takes the caller's payouts in `token` (the zero address for ETH) that could not be
    /// sent at release (see PaymentDeferred).
    function withdraw(address token) external nonReentrant {
        uint256 amount = withdrawable[msg.sender][token];
        if (amount == 0) revert NothingToWithdraw();
        withdrawable[msg.sender][token] = 0;
        emit Withdrawn(msg.sender, token, amount);
        if (!_transfer(token, msg.sender, amount, gasleft())) revert TransferFailed();
    }

    /// @notice The escrow's record of a job.
    function getJob(bytes32 jobKey) external view returns (Job memory) {
        return jobs[jobKey];
    }

    function _release(bytes32 jobKey, Job storage job) private {
        job.status = Status.Released;
        uint256 fee = job.fee;
        uint256 providerAmount = job.payout - fee;
        uint256 customerRefund = job.amount - job.payout;
        emit JobReleased(jobKey, job.provider, providerAmount, fee, customerRefund);
        address token = job.token;
        if (providerAmount > 0) _pay(jobKey, token, job.provider, providerAmount);
        if (fee > 0) _pay(jobKey, token, treasury, fee);
        if (customerRefund > 0) _pay(jobKey, token, job.customer, customerRefund);
    }

    /// Pays one party of a release; a payout that fails is credited to `to` instead, so it never
    /// stops the others. The credit is written after the failed call, which the reentrancy guard
    /// of every caller keeps from reentering.
    function _pay(bytes32 jobKey, address token, address to, uint256 amount) private {
        // Without this a caller could pick a gas limit that starves the payout into a deferral.
        if (gasleft() < PAYOUT_GAS_NEEDED) revert OutOfGas();
        if (_transfer(token, to, amount, PAYOUT_GAS)) return;
        withdrawable[to][token] += amount;
        emit PaymentDeferred(jobKey, to, token, amount);
    }

    /// Sends `amount` of `token` (ETH for the zero address) with at most `gasLimit` gas; true when
    /// it arrived. ETH return data is never copied, so a large answer costs the caller nothing.
    function _transfer(address token, address to, uint256 amount, uint256 gasLimit) private returns (bool ok) {
        if (token == address(0)) {
            assembly ("memory-safe") {
                ok := call(gasLimit, to, amount, 0, 0, 0, 0)
            }
            return ok;
        }
        return _callToken(token, abi.encodeCall(IERC20.transfer, (to, amount)), gasLimit);
    }

    function _pull(address token, address from, uint256 amount) private {
        if (!_callToken(token, abi.encodeCall(IERC20.transferFrom, (from, address(this), amount)), gasleft())) revert TransferFailed();
    }

    /// Calls a token; true when the call succeeded and returned nothing or true (tokens differ).
    /// At most one word of return data is copied.
    function _callToken(address token, bytes memory data, uint256 gasLimit) private returns (bool) {
        if (token.code.length == 0) return false;
        bool ok;
        uint256 size;
        uint256 word;
        assembly ("memory-safe") {
            ok := call(gasLimit, token, 0, add(data, 0x20), mload(data), 0, 0x20)
            size := returndatasize()
            word := mload(0)
        }
        return ok && (size == 0 || (size >= 32 && word == 1));
    }
}
